package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func labels(nodes []Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Label())
	}
	return strings.Join(s, ", ")
}

// partitionOf builds a partition from labels like "0+4".
func partitionOf(t *testing.T, labels ...string) *partition {
	t.Helper()
	var nodes []Node
	for _, l := range labels {
		var start, count int64
		if _, err := fmt.Sscanf(l, "%d+%d", &start, &count); err != nil {
			t.Fatal(err)
		}
		n := Node{L: log2(count), I: start / count}
		nodes = append(nodes, n)
	}
	p := &partition{}
	p.setNodes(nodes)
	return p
}

// unitSizes makes every line 10 bytes, so a merge saves 10.
func unitSizes(Node) (int64, int64, error) { return 10, 20, nil }

// builtFunc answers builtSet by asking a function about each node.
type builtFunc func(Node) bool

func (f builtFunc) firstBuilt(l int, from, to int64) (int64, bool) {
	for j := from; j <= to; j++ {
		if f(Node{L: l, I: j}) {
			return j, true
		}
	}
	return 0, false
}

func allBuilt(Node) bool { return true }

func TestMostDuePairMergesFirst(t *testing.T) {
	tests := []struct {
		name  string
		t     int64
		view  []string
		built func(Node) bool
		want  string
	}{
		{
			name: "newest leaves are most due at T=10",
			t:    10, view: []string{"0+4", "4+4", "8+1", "9+1"},
			built: allBuilt,
			want:  "0+4, 4+4, 8+2",
		},
		{
			name: "older pair wins a lower due",
			t:    4, view: []string{"0+1", "1+1", "2+1", "3+1"},
			built: allBuilt,
			want:  "0+2, 2+1, 3+1",
		},
		{
			name: "ties go to the oldest pair",
			t:    7, view: []string{"0+2", "2+2", "4+1", "5+1", "6+1"},
			built: allBuilt,
			want:  "0+4, 4+1, 5+1, 6+1",
		},
		{
			name: "a pair whose parent is unbuilt is skipped",
			t:    10, view: []string{"0+4", "4+4", "8+1", "9+1"},
			built: func(n Node) bool { return n != (Node{1, 4}) },
			want:  "0+8, 8+1, 9+1",
		},
		{
			name: "neighbours that are not siblings never merge",
			t:    6, view: []string{"0+2", "2+1", "3+1", "4+2"},
			built: func(n Node) bool { return n != (Node{1, 1}) },
			want:  "0+2, 2+1, 3+1, 4+2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := partitionOf(t, tt.view...)
			// One merge brings the size to the target.
			p.Size = 100
			if _, err := p.mergePass(tt.t, 95, 90, false, builtFunc(tt.built), unitSizes); err != nil {
				t.Fatal(err)
			}
			if got := labels(p.nodes()); got != tt.want {
				t.Errorf("after one merge: %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMergePassStaysOpenUntilItReachesItsTarget(t *testing.T) {
	p := partitionOf(t, "0+1", "1+1", "2+1", "3+1")
	p.Size = 200
	built := map[Node]bool{}
	isBuilt := func(n Node) bool { return built[n] }
	if _, err := p.mergePass(4, 150, 100, false, builtFunc(isBuilt), unitSizes); err != nil {
		t.Fatal(err)
	}
	if !p.Open || p.Size != 200 {
		t.Fatalf("no parent built: open=%v size=%d, want an open merge pass and no merge", p.Open, p.Size)
	}
	// A later change resumes the merge pass, even below the high mark.
	built[Node{1, 1}] = true
	p.Size = 120
	if n, _ := p.mergePass(4, 150, 100, false, builtFunc(isBuilt), unitSizes); n != 1 || !p.Open {
		t.Fatalf("resumed merge pass merged %d, open=%v; want 1 merge and still open", n, p.Open)
	}
	built[Node{1, 0}] = true
	built[Node{2, 0}] = true
	if _, err := p.mergePass(4, 150, 100, false, builtFunc(isBuilt), unitSizes); err != nil {
		t.Fatal(err)
	}
	if p.Open || p.Size > 100 {
		t.Errorf("merge pass open=%v at size %d; want closed at or under 100", p.Open, p.Size)
	}
	if got := labels(p.nodes()); got != "0+2, 2+2" {
		t.Errorf("view %s", got)
	}
}

func TestPartitionRunsStayCompact(t *testing.T) {
	p := &partition{}
	p.appendLeaves(0, 100_000)
	if len(p.Runs) != 1 || p.lines() != 100_000 || p.end() != 100_000 {
		t.Fatalf("100,000 leaves in %d runs", len(p.Runs))
	}
	if err := p.check(100_000); err != nil {
		t.Fatal(err)
	}
	n, ok := p.covering(777)
	if !ok || n != (Node{0, 777}) {
		t.Errorf("covering(777) = %v", n)
	}
}

// sizeTrace records a view's size after every event of a chat.
type sizeTrace struct {
	view, compact []int64
}

func (tr *sizeTrace) add(st *chatState) {
	tr.view = append(tr.view, st.View.Size)
	tr.compact = append(tr.compact, st.Compact.Size)
}

// passEvent is one merge pass that merged.
type passEvent struct {
	view          string
	before, after int64
	open          bool
}

// traceMergePasses records the merge passes f's memory runs.
func traceMergePasses(f *fixture) *[]passEvent {
	var events []passEvent
	f.m.onMergePass = func(view string, before, after int64, open bool) {
		events = append(events, passEvent{view, before, after, open})
	}
	return &events
}

// growChat appends n entries of text one by one, building everything
// after each, and traces both views' sizes.
func growChat(t *testing.T, f *fixture, n int, text func(i int) string) *sizeTrace {
	t.Helper()
	tr := &sizeTrace{}
	for i := 0; i < n; i++ {
		f.append(t, "user", text(i))
		f.deliverAll(t)
		tr.add(f.state(t))
	}
	return tr
}

func TestSawtoothGrowsToHighThenDropsToLowInOneMergePass(t *testing.T) {
	f := newFixture(t)
	passes := traceMergePasses(f)
	// 400-byte messages are kept verbatim; their merges are compressed.
	tr := growChat(t, f, 700, func(i int) string { return fmt.Sprintf("%04d %s", i, strings.Repeat("v", 390)) })
	viewPasses := 0
	for _, b := range *passes {
		if b.view != "view" {
			continue
		}
		viewPasses++
		if b.before <= ViewHigh || b.after > ViewLow || b.open {
			t.Errorf("a view merge pass went from %d to %d bytes (open %v); want from past %d to at most %d, closed", b.before, b.after, b.open, ViewHigh, ViewLow)
		}
	}
	if viewPasses == 0 {
		t.Fatal("no view merge pass ran")
	}
	drops := 0
	for k := 1; k < len(tr.view); k++ {
		prev, cur := tr.view[k-1], tr.view[k]
		if cur > ViewHigh {
			t.Fatalf("after entry %d the view is %d bytes, past %d", k, cur, ViewHigh)
		}
		if cur < prev {
			drops++
			// The entry's own leaf line may follow the merge pass.
			if cur > ViewLow+LineBytes {
				t.Errorf("after entry %d the view dropped from %d to %d, not to about %d", k, prev, cur, ViewLow)
			}
			if prev+500 < ViewHigh {
				t.Errorf("after entry %d the view dropped at %d bytes, well before %d", k, prev, ViewHigh)
			}
		}
	}
	if drops == 0 {
		t.Fatalf("the view never dropped; max %d", maxOf(tr.view))
	}
	// The tracked size is the rendered size.
	v, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if st := f.state(t); v.Bytes != st.View.Size {
		t.Errorf("rendered view is %d bytes, state says %d", v.Bytes, st.View.Size)
	}
}

func maxOf(s []int64) int64 {
	var m int64
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

func TestCompactionViewHasItsOwnSawtoothAndFollowsViewMerges(t *testing.T) {
	f := newFixture(t)
	passes := traceMergePasses(f)
	tr := growChat(t, f, 700, func(i int) string { return fmt.Sprintf("%04d %s", i, strings.Repeat("c", 390)) })
	for k := range tr.compact {
		if tr.compact[k] > CompactHigh {
			t.Fatalf("after entry %d the compaction view is %d bytes, past %d", k, tr.compact[k], CompactHigh)
		}
	}
	own, followed := 0, 0
	for k, b := range *passes {
		if b.view != "compaction" {
			continue
		}
		// A merge pass goes down to the target, or stays open while the pair it
		// needs next is not built yet; an open one resumes at the next change.
		if b.after > CompactLow && !b.open {
			t.Errorf("a compaction merge pass closed at %d bytes, above %d", b.after, CompactLow)
		}
		if k > 0 && (*passes)[k-1].view == "view" {
			followed++
		} else if b.before > CompactHigh {
			own++
		}
	}
	if own < 2 || followed == 0 {
		t.Errorf("compaction merge passes: %d past its own high mark, %d following a view merge", own, followed)
	}
	// A build's context is the compaction view up to the node: here the
	// last merge the compactor saw.
	st := f.state(t)
	if err := st.Compact.check(st.T); err != nil {
		t.Fatal(err)
	}
	last := f.comp.last()
	n := Node{L: last.Level, I: last.Index}
	want := st.Compact.before(n.End())
	if !strings.HasPrefix(last.Context, "<chat>\n") || !strings.HasSuffix(last.Context, "</chat>") {
		t.Fatalf("context %q is not a <chat> block", last.Context)
	}
	if lines := strings.Count(last.Context, "\n") - 1; lines > len(want)+2 {
		t.Errorf("context has %d lines; the compaction view up to %s has %d", lines, n.Label(), len(want))
	}
	for _, line := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(last.Context, "<chat>\n"), "\n</chat>"), "\n") {
		var start, count int64
		fmt.Sscanf(line, "%d+%d|", &start, &count)
		if start+count > n.End() {
			t.Errorf("context line %q ends after the node %s", line, n.Label())
		}
	}
}

func TestContextOfALeafEndsAtItsStart(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 5; i++ {
		f.append(t, "user", fmt.Sprintf("short %d", i))
	}
	f.deliverAll(t)
	f.append(t, "user", strings.Repeat("long ", 200)) // entry 5
	f.deliverAll(t)
	c := f.comp.last()
	if c.Label != "5+1" {
		t.Fatalf("last call was %s", c.Label)
	}
	if !strings.Contains(c.Context, "4+1|user: short 4\n") || strings.Contains(c.Context, "5+1|") {
		t.Errorf("leaf 5's context = %q; want the lines ending at or before 5", c.Context)
	}
}

func TestUnbuiltLinesShowThePlaceholder(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		f.append(t, "user", fmt.Sprintf("message %d", i))
	}
	v, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "<chat>\n0+1|" + Placeholder + "\n1+1|" + Placeholder + "\n2+1|" + Placeholder + "\n</chat>"
	if v.View != want || v.Unbuilt != 3 || v.Lines != 3 {
		t.Errorf("view = %q (unbuilt %d)", v.View, v.Unbuilt)
	}
	if v.Bytes != f.state(t).View.Size {
		t.Errorf("bytes %d, state %d", v.Bytes, f.state(t).View.Size)
	}
	f.deliverAll(t)
	v, err = f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	want = "<chat>\n0+1|user: message 0\n1+1|user: message 1\n2+1|user: message 2\n</chat>"
	if v.View != want || v.Unbuilt != 0 {
		t.Errorf("built view = %q (unbuilt %d)", v.View, v.Unbuilt)
	}
	if v.Bytes != f.state(t).View.Size || v.Bytes != int64(len(want)-len("<chat>\n</chat>")) {
		t.Errorf("bytes %d, state %d", v.Bytes, f.state(t).View.Size)
	}
}

func TestSavedPartitionIsReloadedUnchangedAfterARestart(t *testing.T) {
	f := newFixture(t)
	growChat(t, f, 400, func(i int) string { return fmt.Sprintf("%04d %s", i, strings.Repeat("r", 390)) })
	before, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.state(t).View.Merges == 0 {
		t.Fatal("the view never merged; the test needs a saved merge pass")
	}
	// A new process over the same table.
	m2, err := New(Config{Table: f.table, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	after, err := m2.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if after.View != before.View {
		t.Fatalf("the view changed across a restart")
	}
	// The next message only appends: the old view is a prefix of the new.
	f.m = m2
	f.append(t, "user", "one more")
	f.deliverAll(t)
	next, err := m2.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSuffix(before.View, "</chat>")
	if !strings.HasPrefix(next.View, old) || !strings.HasSuffix(next.View, "400+1|user: one more\n</chat>") {
		t.Errorf("the next view does not extend the saved one")
	}
}
