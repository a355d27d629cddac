package client

import "time"

// The server's answers, as it defines them. The client's module depends
// on nothing but the standard library, so it holds its own copy; a test
// of the server's module keeps each one field for field the same as the
// server's (names, JSON keys and types).

// Status is a chat's memory at a glance, as GET .../status answers it.
type Status struct {
	Entries int64 `json:"entries"`
	// Nodes counts the complete nodes of the tree, and Built those written.
	Nodes int64 `json:"nodes"`
	Built int64 `json:"built"`
	// Unbuilt counts complete nodes not written yet; UnbuiltLines the view
	// lines shown as the placeholder.
	Unbuilt      int64 `json:"unbuilt"`
	UnbuiltLines int64 `json:"unbuiltLines"`
	// Retrying counts nodes waiting out a retry delay; InFlight the claimed
	// builds.
	Retrying        int              `json:"retrying"`
	InFlight        int              `json:"inFlight"`
	Stalled         bool             `json:"stalled"`
	LastError       string           `json:"lastError"`
	LastErrorAt     *time.Time       `json:"lastErrorAt,omitempty"`
	Retries         []NodeRetry      `json:"retries,omitempty"`
	Mechanical      []MechanicalNode `json:"mechanical"`
	MechanicalCount int64            `json:"mechanicalCount"`
	ModelCalls      int64            `json:"modelCalls"`
	Verbatim        int64            `json:"verbatim"`
	FailedBuilds    int64            `json:"failedBuilds"`
	View            ViewCounts       `json:"view"`
	CompactionView  ViewCounts       `json:"compactionView"`
	Images          ImageCounts      `json:"images"`
	Search          bool             `json:"search"`
	// Deleting is set while the chat is being deleted: how far it came.
	Deleting *StatusDeletion `json:"deleting,omitempty"`
}

// StatusDeletion is a chat deletion's progress: the chat's stored items
// removed, and the images deleted with it.
type StatusDeletion struct {
	Removed int64 `json:"removed"`
	Images  int64 `json:"images"`
}

// NodeRetry is one node waiting on a retry.
type NodeRetry struct {
	Node     string    `json:"node"`
	Failures int       `json:"failures"`
	Refusals int       `json:"refusals"`
	Next     time.Time `json:"next"`
	Error    string    `json:"error"`
}

// MechanicalNode is a node the model refused as often as the memory
// allows, kept as a marked cut of its source.
type MechanicalNode struct {
	Node string `json:"node"`
	Line string `json:"line"`
}

// ViewCounts describes one saved partition.
type ViewCounts struct {
	Lines     int64 `json:"lines"`
	Bytes     int64 `json:"bytes"`
	BatchOpen bool  `json:"batchOpen"`
	Merges    int64 `json:"merges"`
}

// ImageCounts counts what leaves did with the images they name: totals,
// and the latest leaves one by one.
type ImageCounts struct {
	Leaves    int64 `json:"leaves"`
	Attached  int64 `json:"attached"`
	Skipped   int64 `json:"skipped"`
	Missing   int64 `json:"missing"`
	NamesOnly int64 `json:"namesOnly"`
	// Descriptions of the stored images leaves named: Described have one;
	// DescribeFailed were shown to the model, which wrote none;
	// DescribePending were not shown to a model that can see them (a
	// text-only or offline compactor, a skipped image) and wait for a leaf
	// whose model can.
	Described       int64        `json:"described"`
	DescribeFailed  int64        `json:"describeFailed"`
	DescribePending int64        `json:"describePending"`
	Recent          []LeafImages `json:"recent"`
}

// LeafImages is one leaf's images: named in its source, attached to the
// compactor call, skipped by the compactor, missing from the store, left
// out as already seen (a zoom page), and whether its line came from the
// names-only retry.
type LeafImages struct {
	ID          int64 `json:"id"`
	Named       int   `json:"named"`
	Attached    int   `json:"attached"`
	Skipped     int   `json:"skipped"`
	Missing     int   `json:"missing"`
	AlreadySeen int   `json:"alreadySeen"`
	NamesOnly   bool  `json:"namesOnly"`
	// Descriptions, as ImageCounts counts them.
	Described       int `json:"described"`
	DescribeFailed  int `json:"describeFailed"`
	DescribePending int `json:"describePending"`
}

// MemoryGlance is a chat's memory in four numbers, as GET /v1/chats lists it.
type MemoryGlance struct {
	Nodes    int64 `json:"nodes"`
	Built    int64 `json:"built"`
	Retrying int   `json:"retrying"`
	Stalled  bool  `json:"stalled"`
}

// Tree is a page of one level of a chat's summary tree, as
// GET .../tree answers it.
type Tree struct {
	Entries int64 `json:"entries"`
	// Levels lists every level that has a complete node, leaves first.
	Levels []TreeLevel `json:"levels"`
	// Level is the level of Nodes.
	Level int        `json:"level"`
	Nodes []TreeNode `json:"nodes"`
	// Next is the index to ask for the next page, absent at the end.
	Next *int64 `json:"next,omitempty"`
}

// TreeLevel counts one level's complete nodes and those built.
type TreeLevel struct {
	Level int   `json:"level"`
	Nodes int64 `json:"nodes"`
	Built int64 `json:"built"`
}

// The states of a tree node.
const (
	NodeBuilt      = "built"      // its line is written
	NodeVerbatim   = "verbatim"   // built, its source short enough to keep word for word
	NodeMechanical = "mechanical" // built as a marked cut after repeated refusals
	NodeBuilding   = "building"   // a build is in flight
	NodeRetrying   = "retrying"   // a build failed; waiting out the retry delay
	NodeRefused    = "refused"    // the model refused it; waiting to try again
	NodeUnbuilt    = "unbuilt"    // not started yet
)

// TreeNode is one node: its label ("<start>+<count>"), its state, its line
// when built, the images its line was written with, and for a node that
// failed, its failures, refusals, last error and next try.
type TreeNode struct {
	Node     string     `json:"node"`
	Level    int        `json:"level"`
	Index    int64      `json:"index"`
	Start    int64      `json:"start"`
	Count    int64      `json:"count"`
	Status   string     `json:"status"`
	Line     string     `json:"line,omitempty"`
	Images   []string   `json:"images,omitempty"`
	Failures int        `json:"failures,omitempty"`
	Refusals int        `json:"refusals,omitempty"`
	Error    string     `json:"error,omitempty"`
	Next     *time.Time `json:"next,omitempty"`
}

// ChatInfo is one chat as GET /v1/chats lists it.
type ChatInfo struct {
	Chat         string    `json:"chat"`
	Messages     int64     `json:"messages"`
	LastActivity time.Time `json:"lastActivity"`
	// Memory is the chat's summary memory at a glance.
	Memory MemoryGlance `json:"memory"`
	// Deleting is the progress of a deletion under way.
	Deleting *DeleteProgress `json:"deleting,omitempty"`
}

// ChatList is a page of the tenant's chats; Next is "" on the last page,
// else the after of the next.
type ChatList struct {
	Chats []ChatInfo `json:"chats"`
	Next  string     `json:"next"`
}

// DeleteProgress is how far a chat's deletion has come.
type DeleteProgress struct {
	// Removed counts the chat's stored items removed (entries, memory
	// nodes, receipts, state, texts too big for their rows), Images the
	// images deleted with it (those no other chat of the tenant names).
	Removed int64 `json:"removed"`
	Images  int64 `json:"images"`
	// Done says the chat is gone; its id now names a new, empty chat.
	Done bool `json:"done"`
}

// ImportResult says what an import logged.
type ImportResult struct {
	// Messages counts the messages read, Entries the entries they are
	// logged as (a repeat of an import answers the same entries), New
	// those of them this import logged (0: the chat held the file
	// already, nothing new was logged), Skipped the session lines
	// durachat does not log (another branch, model changes, custom
	// entries).
	Messages int `json:"messages"`
	Entries  int `json:"entries"`
	New      int `json:"new"`
	Skipped  int `json:"skipped"`
	// Renamed maps each name an image line carried whose bytes are not
	// that name's to the name they are stored under; the file's refs to
	// it are logged as refs to the new name. Absent when none is.
	Renamed map[string]string `json:"renamed,omitempty"`
}

// Retention is a retention setting: chats idle longer than Days days are
// deleted (0 keeps them).
type Retention struct {
	Days int `json:"days"`
	// Inherited says a chat has no setting of its own: Days is its
	// tenant's default.
	Inherited bool `json:"inherited,omitempty"`
}

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
