package memory

import (
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/textcut"
)

// The numbers of the design. They are constants, not settings, because the
// view's saved partition and every cached prompt prefix depend on them.
const (
	// LineBytes is the longest source kept word for word, and the target
	// length of a written line.
	LineBytes = 512
	// ViewHigh and ViewLow are the chat view's sawtooth: past ViewHigh
	// bytes it merges, in one merge pass, down to ViewLow.
	ViewHigh = 128_000
	ViewLow  = 64_000
	// CompactHigh and CompactLow are the compaction view's sawtooth.
	CompactHigh = 32_000
	CompactLow  = 16_000
	// MaxInFlight bounds the builds running at once for one chat.
	MaxInFlight = 8
	// Lead: a leaf starts once fewer than Lead lines before it are unbuilt.
	Lead = 8
	// RefusalLimit is how many builds the model may refuse before a node
	// gets a mechanical line instead of another try.
	RefusalLimit = 3
	// PageChars is the page size, in characters, of zoom on one entry.
	PageChars = 25_000
	// SearchHits is the number of hits on one search page, and
	// SnippetChars the length of each hit's snippet.
	SearchHits   = 20
	SnippetChars = 200
	// SourceBytes caps what one entry sends the compactor: a larger
	// source is cut in the middle (head and tail kept). Image names are
	// read from the cut source, so a cut-out middle sends no images.
	SourceBytes = 64 << 10
	// Placeholder is the line of a node that is not built yet.
	Placeholder = "(not summarized yet: zoom it)"
)

// DefaultRetry is how long a failed build waits before it is tried again.
const DefaultRetry = 10 * time.Second

// Node is the tree node (L, I): it covers entries [I*2^L, (I+1)*2^L).
// Level 0 is a leaf; (L+1, I) merges (L, 2I) and (L, 2I+1).
type Node struct {
	L int
	I int64
}

// Start is the first entry the node covers.
func (n Node) Start() int64 { return n.I << n.L }

// Count is the number of entries it covers.
func (n Node) Count() int64 { return 1 << n.L }

// End is one past its last entry.
func (n Node) End() int64 { return (n.I + 1) << n.L }

// Label is "<start>+<count>", the head of its view line.
func (n Node) Label() string {
	return strconv.FormatInt(n.Start(), 10) + "+" + strconv.FormatInt(n.Count(), 10)
}

// Parent is the node that merges n with its sibling.
func (n Node) Parent() Node { return Node{L: n.L + 1, I: n.I / 2} }

// Children are the two nodes a merge joins; only for L > 0.
func (n Node) Children() (Node, Node) {
	return Node{L: n.L - 1, I: 2 * n.I}, Node{L: n.L - 1, I: 2*n.I + 1}
}

// Complete reports whether the node's whole range is logged when the log
// holds t entries; only complete nodes are ever built.
func (n Node) Complete(t int64) bool { return n.L >= 0 && n.I >= 0 && n.End() <= t }

func (n Node) String() string {
	return "(" + strconv.Itoa(n.L) + ", " + strconv.FormatInt(n.I, 10) + ")"
}

// LeafSource is a leaf's source text: "<kind>: <text>".
func LeafSource(kind, text string) string { return kind + ": " + text }

// MergeSource is a merge's source: its children's lines joined by a newline.
func MergeSource(a, b string) string { return a + "\n" + b }

// Line is a node's text as one view line: every run of CR and LF becomes
// one space.
func Line(text string) string {
	if !strings.ContainsAny(text, "\r\n") {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	inBreak := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\r' || c == '\n' {
			if !inBreak {
				b.WriteByte(' ')
			}
			inBreak = true
			continue
		}
		inBreak = false
		b.WriteByte(c)
	}
	return b.String()
}

// lineSize is the bytes a node's line takes in a rendered view:
// "<label>|<line>\n".
func lineSize(n Node, lineLen int) int64 {
	return int64(len(n.Label())+1+lineLen) + 1
}

// placeholderSize is lineSize of an unbuilt node.
func placeholderSize(n Node) int64 { return lineSize(n, len(Placeholder)) }

// leafPlaceholderSizes sums placeholderSize over the leaves [from, to)
// without visiting each one: the size depends only on the digit count.
func leafPlaceholderSizes(from, to int64) int64 {
	var total int64
	for from < to {
		digits := len(strconv.FormatInt(from, 10))
		// The first number with one more digit.
		next := int64(1)
		for i := 0; i < digits; i++ {
			next *= 10
		}
		end := min(to, next)
		total += (end - from) * int64(digits+len("+1|")+len(Placeholder)+1)
		from = end
	}
	return total
}

// cutMiddle cuts s to at most max bytes, keeping its head and tail around
// marker; the cut never splits a UTF-8 character.
func cutMiddle(s string, max int, marker string) string {
	if len(s) <= max {
		return s
	}
	room := max - len(marker)
	if room <= 0 {
		return textcut.Head(marker, max)
	}
	head := textcut.Head(s, room-room/3)
	tail := textcut.Tail(s, room-len(head))
	return head + marker + tail
}

// compactorSource is a leaf's source as the compactor gets it: cut to
// SourceBytes in the middle when larger.
func compactorSource(source string) string {
	return cutMiddle(source, SourceBytes, "\n[... middle of a long message left out ...]\n")
}

// mechanicalLine is the line kept for a node the model refused RefusalLimit
// times: its source cut to LineBytes, head and tail, marked so nobody takes
// it for a summary.
func mechanicalLine(source string) string {
	const mark = "[mechanical: the model refused this; source cut] "
	body := Line(source)
	return textcut.Head(mark+cutMiddle(body, LineBytes-len(mark), " [...] "), LineBytes)
}
