package memory

import (
	"context"

	"github.com/durachat/durachat/shared/model"
)

// CompactRequest asks a Compactor for one node's line: a leaf (Level 0)
// from one entry, or a merge of two child lines. The compactor (or a
// host's own compactor) turns it into one line. (The compaction view is
// the context it carries, not the request.)
type CompactRequest struct {
	Level int
	Index int64
	// Label is "<start>+<count>".
	Label string
	// Kind is the entry kind, for a leaf.
	Kind string
	// Context is the compaction view's "<chat>...</chat>" block for this node:
	// the cacheable prefix of every call.
	Context string
	// Source is the text to compact: "<kind>: <text>" for a leaf, the two
	// child lines joined by a newline for a merge.
	Source string
	// Children are a merge's two child lines, in a Group only; "" for a
	// child the same group writes.
	Children [2]string
	// Images are the images the leaf's source names that are stored, in
	// first-named order. Never nil; empty for merges.
	Images []model.Image
	// Describe names the Images that have no description yet: a compactor
	// that shows them to its model may return one for each
	// (Compacted.Descriptions) from the same call. Empty for merges.
	Describe []string
}

// Compacted is a written line and how it came to be.
type Compacted struct {
	Line string
	// Verbatim: the source was kept word for word.
	Verbatim bool
	// Mechanical: the source cut to size, not a model's summary.
	Mechanical bool
	Attempts   int
	Model      string
	// Images attached to the call, skipped (unsupported, over a limit), and
	// whether the line came from the names-only retry.
	Attached  int
	Skipped   int
	NamesOnly bool
	Usage     model.Usage
	// Descriptions are what the model said each image of
	// CompactRequest.Describe shows, by name; an image it did not describe
	// is absent. DescribeAsked counts the images of CompactRequest.Describe
	// the model was shown and asked to describe.
	Descriptions  map[string]string
	DescribeAsked int
}

// Compactor writes one node's line. Errors are classified with
// model.IsRetryable and model.IsRefused.
type Compactor interface {
	Compact(ctx context.Context, c CompactRequest) (Compacted, error)
}

// Group is several nodes of one chat whose lines one call writes: leaves
// next to each other, or merges, where a merge may come after a node of
// the same group whose line it merges. Nodes are in the order they are
// written: a node comes after every node of the group it merges.
type Group struct {
	// Context is the compaction view's "<chat>...</chat>" block: the lines
	// that end at or before the latest context end of the group's nodes,
	// a superset of what each node alone would read.
	Context string
	// Nodes are the nodes to write. A merge's Children are its two child
	// lines; a child that is a node of the group has "" there, and Source
	// is then empty too: it is the children's lines joined once that
	// child's line is written.
	Nodes []CompactRequest
}

// GroupCompactor is a Compactor that can also write the lines of several
// nodes in one call. Each node keeps its own line, images, labels and
// acceptance rules; a node the call could not write well falls back to a
// build of its own.
type GroupCompactor interface {
	Compactor
	// CompactGroup returns one Compacted per node of g, in order. A
	// Compacted with an empty Line was not written by the call: that node
	// is built on its own. An error ends the call for every node: a
	// retryable one fails them all (retried after the delay), any other
	// builds each node on its own, where its own fallbacks apply.
	CompactGroup(ctx context.Context, g Group) ([]Compacted, error)
}
