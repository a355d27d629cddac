package wire

import "time"

// View is a chat's memory view, as GET .../view answers it.
type View struct {
	// View is the text for the system prompt: "<chat>\n", one
	// "<start>+<count>|<line>\n" per node, "</chat>".
	View string `json:"view"`
	// Lines is the number of node lines.
	Lines int64 `json:"lines"`
	// Bytes is the view's size: the bytes of its node lines, heads and
	// newlines included, without the <chat> and </chat> tags. The
	// sawtooth compares this number with 128,000 and 64,000.
	Bytes int64 `json:"bytes"`
	// Unbuilt counts the lines shown as the placeholder, not summarized
	// yet.
	Unbuilt int64 `json:"unbuilt"`
	// Retrying counts nodes waiting out a retry delay.
	Retrying int `json:"retrying"`
	// Stalled: nothing in flight and something waiting on a retry (builds
	// keep failing; LastError says why); a turn goes on with placeholders.
	Stalled   bool   `json:"stalled"`
	LastError string `json:"lastError"`
}

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
	// SearchMode is how search ranks (SearchLexical, SearchLexicalVector);
	// EmbedModel names the embedding model of the second ("" without one).
	SearchMode string `json:"searchMode"`
	EmbedModel string `json:"embedModel,omitempty"`
	// Deleting is set while the chat is being deleted: how far it came.
	Deleting *StatusDeletion `json:"deleting,omitempty"`
}

// How search ranks, as status and the memory settings say.
const (
	// SearchLexical: by words alone (BM25 over stemmed terms).
	SearchLexical = "lexical"
	// SearchLexicalVector: by words and by meaning (the embedding model's
	// nearest vectors), fused by reciprocal rank.
	SearchLexicalVector = "lexical+vector"
)

// MemorySettings are a chat's memory settings, as GET .../memory/settings
// answers them: its opt-in tools, and how search ranks.
type MemorySettings struct {
	Search     bool   `json:"search"`
	Forget     bool   `json:"forget"`
	SearchMode string `json:"searchMode"`
	EmbedModel string `json:"embedModel,omitempty"`
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
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// MergePassOpen: the view passed its high mark and a merge pass is
	// merging it down to its low one (on the wire, batchOpen).
	MergePassOpen bool  `json:"batchOpen"`
	Merges        int64 `json:"merges"`
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
