package wire

// Unrestored is a ref left as text, and why: "not_found", "unavailable",
// "error" (any other failure of the store), "budget", "format", "limit"
// (the provider takes no more images) or "describe".
type Unrestored struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Restoration is what before-request did to a request: the images it put
// back, the refs it left as text, and what the request now costs.
type Restoration struct {
	Restored   []string     `json:"restored"`
	Unrestored []Unrestored `json:"unrestored"`
	// UnrestoredOmitted counts the refs left as text past the first 1,000
	// listed in Unrestored.
	UnrestoredOmitted int `json:"unrestoredOmitted,omitempty"`
	// InlineBytes is the base64 the restore added inline.
	InlineBytes int64 `json:"inlineBytes"`
	// Images counts the images the request now shows the model, every ref
	// left as text counted as one (it stands for an image).
	Images int `json:"images"`
	// EstimatedImageTokens estimates what those images cost as input.
	EstimatedImageTokens int `json:"estimatedImageTokens"`
	// Described counts the refs left as text that carry their image's
	// description ("[image <name>: <description>]"); PendingDescriptions
	// the images whose refs stay bare because they have none yet (or it
	// could not be read now).
	Described           int `json:"described"`
	PendingDescriptions int `json:"pendingDescriptions"`
}
