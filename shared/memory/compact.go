package memory

import (
	"context"

	"github.com/durachat/durachat/shared/model"
)

// Compaction is one node to write: a leaf (Level 0) from one entry, or a
// merge of two child lines. The compactor (or a host's own compactor)
// turns it into one line.
type Compaction struct {
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
	// Descriptions are what the model said each image of Compaction.Describe
	// shows, by name; an image it did not describe is absent.
	// DescribeAsked counts the images of Compaction.Describe the model was
	// shown and asked to describe.
	Descriptions  map[string]string
	DescribeAsked int
}

// Compactor writes one node's line. Errors are classified with
// model.IsRetryable and model.IsRefused.
type Compactor interface {
	Compact(ctx context.Context, c Compaction) (Compacted, error)
}
