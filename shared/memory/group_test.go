package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/model"
)

// newGroupFixture is newFixture with a compactor that writes groups.
func newGroupFixture(t testing.TB) (*fixture, *grouping) {
	t.Helper()
	f := newFixture(t)
	g := newGrouping()
	f.comp = g.scripted
	m, err := New(Config{Table: f.table, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: g, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() {
		for _, p := range g.groupProblems() {
			t.Error(p)
		}
	})
	return f, g
}

func longText(i int) string { return fmt.Sprintf("message %d: %s", i, strings.Repeat("detail ", 100)) }

// calledRows counts the rows that carry a model call.
func (f *fixture) calledRows(t testing.TB, nodes ...Node) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		if r, ok := f.row(t, node); ok && r.Called {
			n++
		}
	}
	return n
}

func leaves(from, to int64) []Node {
	var out []Node
	for i := from; i < to; i++ {
		out = append(out, Node{L: 0, I: i})
	}
	return out
}

func TestConsecutiveUnbuiltLeavesShareOneCallEachWithItsOwnLine(t *testing.T) {
	f, g := newGroupFixture(t)
	texts := []string{"hi", longText(1), "ok", longText(3), longText(4)}
	f.append(t, "user", texts...)
	f.deliverAll(t)
	calls, labels := g.groupCalls()
	if calls < 1 || f.comp.total() != 0 {
		t.Fatalf("%d group calls and %d single calls, want the leaves in one group call", calls, f.comp.total())
	}
	if first := g.groups[0]; !slices.Equal(first, []string{"1+1", "3+1", "4+1"}) {
		t.Fatalf("first group call wrote %v, want the three long leaves", first)
	}
	for i, text := range texts {
		r, ok := f.row(t, Node{L: 0, I: int64(i)})
		if !ok {
			t.Fatalf("leaf %d has no row", i)
		}
		src := LeafSource("user", text)
		if len(src) <= LineBytes {
			if r.Text != src || !r.Verbatim || r.Called {
				t.Fatalf("leaf %d: %+v, want its words", i, r)
			}
			continue
		}
		if want := scriptedLine(fmt.Sprintf("%d+1", i), src, 0); r.Text != want || r.Verbatim {
			t.Fatalf("leaf %d: %q, want its own line %q", i, r.Text, want)
		}
	}
	if n := f.calledRows(t, leaves(0, 5)...); n != 1 {
		t.Fatalf("%d leaf rows carry the call, want 1", n)
	}
	s, err := f.m.Status(context.Background(), f.tenant, f.chat)
	if err != nil {
		t.Fatal(err)
	}
	if s.ModelCalls != int64(calls) || s.Unbuilt != 0 {
		t.Fatalf("status: %d model calls, %d unbuilt; the compactor made %d calls (%v)", s.ModelCalls, s.Unbuilt, calls, labels)
	}
}

func TestMergesAndTheMergesAboveThemShareOneCall(t *testing.T) {
	f, g := newGroupFixture(t)
	g.lineLen = 300 // two lines of a pair pass 512 bytes: every merge needs the model
	var texts []string
	for i := 0; i < 8; i++ {
		texts = append(texts, longText(i))
	}
	f.append(t, "talk", texts...)
	f.deliverAll(t)
	st := f.state(t)
	if st.unbuiltLeaves() != 0 || !st.built(Node{L: 3, I: 0}) {
		t.Fatalf("not all built: %+v", st.Levels)
	}
	calls, labels := g.groupCalls()
	if f.comp.total() != 0 || calls > 2 {
		t.Fatalf("%d group calls (%v) and %d single calls: want the leaves in one and the merges in another", calls, labels, f.comp.total())
	}
	// Every merge's line is its own, from its children's lines as stored.
	for l := 1; l <= 3; l++ {
		for i := int64(0); i < 8>>l; i++ {
			n := Node{L: l, I: i}
			r, _ := f.row(t, n)
			a, b := n.Children()
			ra, _ := f.row(t, a)
			rb, _ := f.row(t, b)
			if want := scriptedLine(n.Label(), MergeSource(Line(ra.Text), Line(rb.Text)), 300); r.Text != want {
				t.Fatalf("merge %s: %q, want %q", n.Label(), r.Text, want)
			}
			if r.Child != [2]int{len(Line(ra.Text)), len(Line(rb.Text))} {
				t.Fatalf("merge %s records child lengths %v", n.Label(), r.Child)
			}
		}
	}
	var all []Node
	for l := 0; l <= 3; l++ {
		for i := int64(0); i < 8>>l; i++ {
			all = append(all, Node{L: l, I: i})
		}
	}
	s, _ := f.m.Status(context.Background(), f.tenant, f.chat)
	if n := f.calledRows(t, all...); n != calls || s.ModelCalls != int64(calls) || s.Built != 15 || len(st.Claims) != 0 {
		t.Fatalf("%d rows carry a call, status %d calls, %d built, %d claims left; the compactor made %d", n, s.ModelCalls, s.Built, len(st.Claims), calls)
	}
}

func TestALineTheGroupCallDoesNotWriteIsBuiltOnItsOwn(t *testing.T) {
	f, g := newGroupFixture(t)
	g.groupScript = func(gr Group) ([]Compacted, error) {
		outs := make([]Compacted, len(gr.Nodes))
		for k, c := range gr.Nodes {
			if c.Label != "1+1" {
				outs[k] = Compacted{Line: "group line " + c.Label, Attempts: 1, Model: "scripted"}
			}
		}
		return outs, nil
	}
	f.append(t, "talk", longText(0), longText(1), longText(2))
	f.deliverAll(t)
	if f.comp.callsOf("1+1") != 1 || f.comp.total() != 1 {
		t.Fatalf("single calls: %v, want one for 1+1", f.comp.calls)
	}
	for i, want := range []string{"group line 0+1", scriptedLine("1+1", LeafSource("talk", longText(1)), 0), "group line 2+1"} {
		if r, _ := f.row(t, Node{L: 0, I: int64(i)}); r.Text != want {
			t.Fatalf("leaf %d: %q, want %q", i, r.Text, want)
		}
	}
	if n := f.calledRows(t, leaves(0, 3)...); n != 2 {
		t.Fatalf("%d rows carry a call, want 2 (the group's and 1+1's own)", n)
	}
}

func TestARetryableGroupErrorRetriesEveryNodeAfterTheDelay(t *testing.T) {
	f, g := newGroupFixture(t)
	fail := true
	g.groupScript = func(gr Group) ([]Compacted, error) {
		if fail {
			return nil, &model.Error{Retryable: true, Status: 429, Err: errors.New("throttled")}
		}
		outs := make([]Compacted, len(gr.Nodes))
		for k, c := range gr.Nodes {
			outs[k] = Compacted{Line: "line " + c.Label, Attempts: 1, Model: "scripted"}
		}
		return outs, nil
	}
	f.append(t, "talk", longText(0), longText(1), longText(2))
	later := f.deliverAll(t)
	st := f.state(t)
	if len(st.Retries) != 3 || len(st.Claims) != 0 || st.unbuiltLeaves() != 3 {
		t.Fatalf("retries %+v, claims %+v", st.Retries, st.Claims)
	}
	for _, r := range st.Retries {
		if r.Failures != 1 || r.Refusals != 0 {
			t.Fatalf("retry %+v: want one failure, no refusal", r)
		}
	}
	// Every node comes back after the delay, not only the delivered one.
	back := map[Node]bool{}
	for _, s := range later {
		if s.delay >= DefaultRetry-time.Second {
			back[Node{L: s.msg.L, I: s.msg.I}] = true
		}
	}
	if len(back) != 3 {
		t.Fatalf("messages coming back: %v, want all three leaves", later)
	}
	fail = false
	f.clock.Add(DefaultRetry)
	for _, s := range later {
		f.queue.msgs = append(f.queue.msgs, sent{msg: s.msg})
	}
	f.deliverAll(t)
	if st := f.state(t); st.unbuiltLeaves() != 0 || len(st.Retries) != 0 {
		t.Fatalf("after the delay: %d unbuilt, retries %+v", st.unbuiltLeaves(), st.Retries)
	}
}

func TestARefusedGroupIsBuiltNodeByNodeAndOnlyTheRefusedNodeCountsIt(t *testing.T) {
	f, g := newGroupFixture(t)
	g.groupScript = func(Group) ([]Compacted, error) {
		return nil, model.RefusedError(model.ErrRefused)
	}
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if c.Label == "1+1" {
			return Compacted{}, model.RefusedError(model.ErrRefused)
		}
		return Compacted{Line: "alone " + c.Label, Attempts: 1, Model: "scripted"}, nil
	}
	f.append(t, "talk", longText(0), longText(1), longText(2))
	f.deliverAll(t)
	st := f.state(t)
	if !st.built(Node{L: 0, I: 0}) || !st.built(Node{L: 0, I: 2}) || st.built(Node{L: 0, I: 1}) {
		t.Fatalf("built %+v", st.Levels)
	}
	if len(st.Retries) != 1 || st.Retries[0].I != 1 || st.Retries[0].Refusals != 1 {
		t.Fatalf("retries %+v, want 1+1 alone with one refusal", st.Retries)
	}
}

func TestTheMessagesOfNodesAGroupTookFindThemHeldAndBuildNothingTwice(t *testing.T) {
	f, g := newGroupFixture(t)
	f.append(t, "talk", longText(0), longText(1), longText(2))
	msgs := f.queue.take()
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want one per leaf", len(msgs))
	}
	// The first message's build takes all three; the other two arrive
	// while its call runs, and again after it.
	g.groupScript = func(gr Group) ([]Compacted, error) {
		for _, s := range msgs[1:] {
			if err := f.m.Build(context.Background(), s.msg.Tenant, s.msg.Chat, s.msg.L, s.msg.I); err != nil {
				t.Errorf("duplicate during the call: %v", err)
			}
		}
		outs := make([]Compacted, len(gr.Nodes))
		for k, c := range gr.Nodes {
			outs[k] = Compacted{Line: "line " + c.Label, Attempts: 1, Model: "scripted"}
		}
		return outs, nil
	}
	if err := f.m.Build(context.Background(), f.tenant, f.chat, 0, 0); err != nil {
		t.Fatal(err)
	}
	g.groupScript = nil
	for _, s := range msgs[1:] {
		if err := f.m.Build(context.Background(), s.msg.Tenant, s.msg.Chat, s.msg.L, s.msg.I); err != nil {
			t.Fatal(err)
		}
	}
	f.deliverAll(t)
	calls, _ := g.groupCalls()
	s, _ := f.m.Status(context.Background(), f.tenant, f.chat)
	if s.Built != 4 || s.ModelCalls != int64(calls+f.comp.total()) || f.calledRows(t, leaves(0, 3)...) != 1 {
		t.Fatalf("status %+v; %d group calls, %d single", s, calls, f.comp.total())
	}
}
