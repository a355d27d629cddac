package wire

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Block is a pi-ai content block: text, image, toolCall or thinking. Only
// the fields of its type are set.
type Block struct {
	Type string `json:"type"`
	// Text of a text block. A ref block is a text block whose whole text
	// is one ref, "[image <16 hex digits>]".
	Text string `json:"text,omitempty"`
	// Data (base64) and MimeType of an image block; Name is the name it is
	// stored under, when it came from durachat (zoom, before-request).
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	// Name is also a toolCall's tool name.
	Name string `json:"name,omitempty"`
	// ID and Arguments of a toolCall block.
	ID        string          `json:"id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Thinking of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// URL is a signed link to the image of a ref block, in messages read
	// back with links; it works for minutes.
	URL string `json:"url,omitempty"`
}

// MarshalJSON keeps the text of a text block even when it is empty.
func (b Block) MarshalJSON() ([]byte, error) {
	type plain Block
	if b.Type != "text" || b.Text != "" {
		return json.Marshal(plain(b))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(b), ""})
}

// Content is a message's content blocks. It also decodes pi-ai's string
// content, as one text block.
type Content []Block

func (c *Content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Text joins the text of the text blocks, one per line.
func (c Content) Text() string {
	var parts []string
	for _, b := range c {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Refs lists the names of the content's ref blocks, in order.
func (c Content) Refs() []string {
	var names []string
	for _, b := range c {
		if name, ok := RefName(b); ok {
			names = append(names, name)
		}
	}
	return names
}

var refText = regexp.MustCompile(`^\[image ([0-9a-f]{16})\]$`)

// RefName returns the image name of a ref block: a text block whose whole
// text is "[image <16 hex digits>]".
func RefName(b Block) (string, bool) {
	if b.Type != "text" {
		return "", false
	}
	m := refText.FindStringSubmatch(b.Text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// ToolResult is a pi tool result: what a tool returns, what after-tool
// takes and gives back, and what the memory tools answer.
type ToolResult struct {
	Content Content `json:"content"`
	IsError bool    `json:"isError"`
	// Details is a host's own data about the result, passed through.
	Details json.RawMessage `json:"details,omitempty"`
}

// ZoomArgs are the zoom tool's arguments as a client sends them: the
// block of N entries starting at ID (N 0 means 1, one original entry), and
// for one entry the page (Offset and Limit in characters; 0 means the
// defaults). The server also takes what a model writes (numbers as
// strings), and tells a field left out from one set to 0.
type ZoomArgs struct {
	ID     int64 `json:"id"`
	N      int64 `json:"n,omitempty"`
	Offset int64 `json:"offset,omitempty"`
	Limit  int64 `json:"limit,omitempty"`
}

// SearchArgs are the search tool's arguments as a client sends them: the
// text to find, and for the next page of older hits the id to search
// before (0: from the newest).
type SearchArgs struct {
	Text   string `json:"text"`
	Before int64  `json:"before,omitempty"`
}
