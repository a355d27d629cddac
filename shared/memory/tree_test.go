package memory

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestNodeLabelsAndRanges(t *testing.T) {
	tests := []struct {
		node       Node
		label      string
		start, end int64
		parent     Node
	}{
		{Node{0, 0}, "0+1", 0, 1, Node{1, 0}},
		{Node{0, 5}, "5+1", 5, 6, Node{1, 2}},
		{Node{1, 3}, "6+2", 6, 8, Node{2, 1}},
		{Node{3, 2}, "16+8", 16, 24, Node{4, 1}},
		{Node{8, 4}, "1024+256", 1024, 1280, Node{9, 2}},
		{Node{10, 1}, "1024+1024", 1024, 2048, Node{11, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			n := tt.node
			if got := n.Label(); got != tt.label {
				t.Errorf("label = %q, want %q", got, tt.label)
			}
			if n.Start() != tt.start || n.End() != tt.end || n.End()-n.Start() != n.Count() {
				t.Errorf("range = [%d, %d) count %d, want [%d, %d)", n.Start(), n.End(), n.Count(), tt.start, tt.end)
			}
			if n.Parent() != tt.parent {
				t.Errorf("parent = %v, want %v", n.Parent(), tt.parent)
			}
			if n.L > 0 {
				a, b := n.Children()
				if a.Start() != n.Start() || b.End() != n.End() || a.End() != b.Start() || a.Parent() != n || b.Parent() != n {
					t.Errorf("children %v %v do not split %v", a, b, n)
				}
			}
			if !n.Complete(tt.end) || n.Complete(tt.end-1) {
				t.Errorf("complete only once the log holds %d entries", tt.end)
			}
		})
	}
}

func TestLineReplacesRunsOfLineBreaksWithOneSpace(t *testing.T) {
	tests := map[string]string{
		"plain":             "plain",
		"a\nb":              "a b",
		"a\r\n\r\nb":        "a b",
		"a\n\n\nb\rc":       "a b c",
		"\nstart and end\n": " start and end ",
		"tab\tstays":        "tab\tstays",
	}
	for in, want := range tests {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLeafAndMergeSources(t *testing.T) {
	if got := LeafSource("user", "hello"); got != "user: hello" {
		t.Errorf("leaf source = %q", got)
	}
	if got := MergeSource("a line", "b line"); got != "a line\nb line" {
		t.Errorf("merge source = %q", got)
	}
}

func TestMechanicalLineIsMarkedCutAndFits(t *testing.T) {
	src := "user: " + strings.Repeat("héllo wörld ", 200) + "THE END"
	line := mechanicalLine(src)
	if len(line) > LineBytes {
		t.Fatalf("mechanical line is %d bytes, over %d", len(line), LineBytes)
	}
	if !strings.HasPrefix(line, "[mechanical:") || !strings.HasSuffix(line, "THE END") || !strings.Contains(line, "user: héllo") {
		t.Errorf("mechanical line keeps neither marker, head nor tail: %q", line)
	}
	if !utf8.ValidString(line) {
		t.Errorf("mechanical line split a character")
	}
}

func TestPlaceholderSizesSumAcrossDigitCounts(t *testing.T) {
	for _, r := range [][2]int64{{0, 0}, {0, 1}, {0, 10}, {5, 1234}, {99, 100_001}} {
		var want int64
		for s := r[0]; s < r[1]; s++ {
			want += placeholderSize(Node{0, s})
		}
		if got := leafPlaceholderSizes(r[0], r[1]); got != want {
			t.Errorf("placeholders [%d, %d) = %d bytes, want %d", r[0], r[1], got, want)
		}
	}
}

func TestShortSourcesAreKeptVerbatimWithoutAModelCall(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		verbatim bool
	}{
		{"one byte", "x", true},
		{"exactly 512 bytes", strings.Repeat("a", LineBytes-len("user: ")), true},
		{"513 bytes", strings.Repeat("a", LineBytes-len("user: ")+1), false},
		{"line breaks kept in the text", "first\nsecond", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.append(t, "user", tt.text)
			f.deliverAll(t)
			row, ok := f.row(t, Node{0, 0})
			if !ok {
				t.Fatal("leaf not built")
			}
			calls := f.comp.callsOf("0+1")
			if tt.verbatim {
				if row.Text != "user: "+tt.text || !row.Verbatim || calls != 0 {
					t.Errorf("row %q verbatim=%v after %d model calls; want the source word for word, no call", row.Text, row.Verbatim, calls)
				}
			} else if row.Verbatim || calls != 1 {
				t.Errorf("a %d-byte source was kept verbatim=%v with %d calls; want one compactor call", len(tt.text)+6, row.Verbatim, calls)
			}
		})
	}
}

func TestShortMergeIsKeptVerbatim(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "hi")
	f.append(t, "talk", "hello")
	f.deliverAll(t)
	row, ok := f.row(t, Node{1, 0})
	if !ok {
		t.Fatal("merge not built")
	}
	if row.Text != "user: hi\ntalk: hello" || !row.Verbatim || f.comp.total() != 0 {
		t.Errorf("merge = %q (verbatim %v, %d calls), want the two child lines joined by a newline", row.Text, row.Verbatim, f.comp.total())
	}
	if row.Child != [2]int{len("user: hi"), len("talk: hello")} {
		t.Errorf("merge row records child lengths %v", row.Child)
	}
}

func TestLongMergeGoesToTheCompactorWithItsChildLines(t *testing.T) {
	f := newFixture(t)
	f.comp.lineLen = 300 // two such lines pass 512 bytes
	long := strings.Repeat("w", 600)
	f.append(t, "user", long)
	f.append(t, "talk", long)
	f.deliverAll(t)
	c := f.comp.seen
	var merge *CompactRequest
	for k := range c {
		if c[k].Level == 1 {
			merge = &c[k]
		}
	}
	if merge == nil {
		t.Fatal("the merge never reached the compactor")
	}
	a, _ := f.row(t, Node{0, 0})
	b, _ := f.row(t, Node{0, 1})
	if merge.Source != Line(a.Text)+"\n"+Line(b.Text) || merge.Label != "0+2" || merge.Images == nil || len(merge.Images) != 0 {
		t.Errorf("merge compaction = %+v", merge)
	}
	// A redelivered message for the built merge asks nothing more.
	if err := f.m.Build(context.Background(), f.tenant, f.chat, 1, 0); err != nil || f.comp.callsOf("0+2") != 1 {
		t.Errorf("redelivery: err %v, %d calls", err, f.comp.callsOf("0+2"))
	}
}
