package memory

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// e2eText is message i of the end-to-end chat: most need the compactor,
// every fifth is short enough to keep word for word.
func e2eText(i int) string {
	if i%5 == 0 {
		return fmt.Sprintf("short message %d", i)
	}
	return fmt.Sprintf("message %d: %s", i, strings.Repeat(fmt.Sprintf("detail-%d ", i), 60))
}

// consume runs builds until ctx ends: the in-process Worker, or the
// compaction function's HandleBatch fed from the Receiver the way Lambda's
// event source mapping feeds it.
func consume(ctx context.Context, t *testing.T, m *Memory, q store.Queue, recv store.Receiver, viaSQS bool) {
	c := newConsumer(m, q, recv)
	if !viaSQS {
		if err := c.Worker(ctx, recv); err != nil {
			t.Error(err)
		}
		return
	}
	for ctx.Err() == nil {
		got, err := recv.Receive(ctx, 10, m.claimLease, time.Second)
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("receive: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if len(got) == 0 {
			continue
		}
		failed := map[string]bool{}
		for _, id := range c.HandleBatch(ctx, got) {
			failed[id] = true
		}
		for _, d := range got {
			if !failed[d.ID] {
				if err := recv.Ack(ctx, d.Receipt); err != nil && ctx.Err() == nil {
					t.Logf("ack: %v", err)
				}
			}
		}
	}
}

// e2eSize is the end-to-end chat's length and its compactor's line
// length. What the tests prove needs a view past its high mark (so merge
// passes run), every level of a tree of hundreds of nodes, and verbatim
// and summarized nodes side by side: 512 messages with 400-byte lines
// give a view of about 160 KB. make test-long runs the 2,000 messages of
// 150-byte lines the tests were first written at (over 4,000 builds, two
// minutes on the AWS backend on a 2-core machine).
func e2eSize() (total, lineLen int) {
	if testenv.Long() {
		return 2000, 150
	}
	return 512, 400
}

func TestALongChatIsBuiltEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: not in -short")
	}
	// The backends share nothing, so they run at once: the test takes as
	// long as the slower one.
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			runEndToEnd(t, b, b.Name == "aws", false)
		})
	}
}

// With a compactor that writes groups, builds share calls: every node is
// still built once, each with its own line, and status counts the calls.
func TestALongChatIsBuiltEndToEndWithGroupCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: not in -short")
	}
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			runEndToEnd(t, b, b.Name == "aws", true)
		})
	}
}

func runEndToEnd(t *testing.T, b testenv.Backend, viaSQS, groups bool) {
	total, lineLen := e2eSize()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	imgs := images.New(b.Blobs)
	log := transcript.New(transcript.Config{Table: b.Table, Blobs: b.Blobs, Images: imgs})
	gcomp := newGrouping()
	comp := gcomp.scripted
	comp.lineLen = lineLen
	var compactor Compactor = comp
	if groups {
		compactor = gcomp
	}
	m, err := New(Config{Table: b.Table, Transcript: log, Images: imgs, Queue: b.Queue, Compactor: compactor,
		ClaimLease: time.Minute, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	const tenant, chat = "tenant-e2e", "chat-e2e"
	done := make(chan struct{})
	go func() {
		defer close(done)
		consume(ctx, t, m, b.Queue, b.Receiver, viaSQS)
	}()

	// Log the chat in turns of 20 messages, as a host does.
	for at := 0; at < total; at += 20 {
		var msgs []pi.Message
		for i := at; i < min(at+20, total); i++ {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, pi.Message{Role: role, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(e2eText(i))}}})
		}
		ch, ids, err := log.AppendChat(ctx, tenant, chat, msgs, fmt.Sprintf("turn-%d", at))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Appended(ctx, ch, ids[len(ids)-1]+1); err != nil {
			t.Fatal(err)
		}
	}

	// Wait until every complete node is built. The bound is for builds
	// that stop, not a time to meet: on dynalite one chat's 4,000 builds,
	// one after another behind its state item, take over 2 minutes on a
	// 2-core machine.
	deadline := time.Now().Add(6 * time.Minute)
	var s wire.Status
	for {
		if s, err = m.Status(ctx, tenant, chat); err != nil {
			t.Fatal(err)
		}
		if s.Entries == int64(total) && s.Unbuilt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not built in time: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done

	// Every complete node has its row and was built exactly once.
	var all []Node
	for l := 0; int64(1)<<l <= int64(total); l++ {
		for i := int64(0); (i+1)<<l <= int64(total); i++ {
			all = append(all, Node{L: l, I: i})
		}
	}
	ch, err := m.current(context.Background(), tenant, chat)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := m.rows(context.Background(), ch, 0, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(all) || s.Built != int64(len(all)) {
		t.Fatalf("%d rows and %d built of %d complete nodes", len(rows), s.Built, len(all))
	}
	groupCalls, grouped := gcomp.groupCalls()
	inGroups := map[string]int{}
	for _, label := range grouped {
		inGroups[label]++
	}
	for _, n := range all {
		calls := comp.callsOf(n.Label())
		if groups {
			// A group call may also keep a merge over its own lines word
			// for word; no line is written twice.
			if w := calls + inGroups[n.Label()]; w > 1 || (w == 0 && !rows[n].verbatim) {
				t.Errorf("node %s: written %d times, verbatim %v", n.Label(), w, rows[n].verbatim)
			}
			continue
		}
		if calls > 1 || (calls == 0) != rows[n].verbatim {
			t.Errorf("node %s: %d compactor calls, verbatim %v", n.Label(), calls, rows[n].verbatim)
		}
	}
	if s.ModelCalls != int64(comp.total()+groupCalls) {
		t.Errorf("status counts %d model calls, the compactor saw %d and %d group calls", s.ModelCalls, comp.total(), groupCalls)
	}
	if groups && groupCalls == 0 {
		t.Error("no group call")
	}
	for _, p := range gcomp.groupProblems() {
		t.Error(p)
	}

	// The view is within its bounds and renders what the state says.
	v, err := m.ReadView(context.Background(), tenant, chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Bytes > ViewHigh || v.Unbuilt != 0 || v.Bytes != s.View.Bytes || s.View.Merges == 0 {
		t.Errorf("view: %d bytes, %d unbuilt, state %d bytes, %d merges", v.Bytes, v.Unbuilt, s.View.Bytes, s.View.Merges)
	}
	if s.CompactionView.Bytes > CompactHigh {
		t.Errorf("compaction view %d bytes", s.CompactionView.Bytes)
	}

	// Zoom reaches every original from the view's lines.
	head := regexp.MustCompile(`(?m)^(\d+)\+(\d+)\|`)
	reached := make([]bool, total)
	var walk func(start, count int64)
	walk = func(start, count int64) {
		if count == 1 {
			if viaSQS && start%10 != 3 {
				reached[start] = true // opened by its parent; read a sample below
				return
			}
			res, err := m.Zoom(context.Background(), tenant, chat, wire.ZoomArgs{ID: start})
			if err != nil {
				t.Fatal(err)
			}
			kind := "user"
			if start%2 == 1 {
				kind = "talk"
			}
			if res.IsError || res.Content[0].Text != kind+": "+e2eText(int(start)) {
				t.Errorf("zoom %d = %q", start, res.Content[0].Text)
			}
			reached[start] = true
			return
		}
		res, err := m.Zoom(context.Background(), tenant, chat, wire.ZoomArgs{ID: start, N: count})
		if err != nil {
			t.Fatal(err)
		}
		children := head.FindAllStringSubmatch(res.Content[0].Text, -1)
		if res.IsError || len(children) != 2 || strings.Contains(res.Content[0].Text, "not summarized") {
			t.Fatalf("zoom %d+%d = %q", start, count, res.Content[0].Text)
		}
		for _, c := range children {
			var s, n int64
			fmt.Sscan(c[1], &s)
			fmt.Sscan(c[2], &n)
			walk(s, n)
		}
	}
	for _, line := range head.FindAllStringSubmatch(v.View, -1) {
		var s, n int64
		fmt.Sscan(line[1], &s)
		fmt.Sscan(line[2], &n)
		walk(s, n)
	}
	for i, ok := range reached {
		if !ok {
			t.Fatalf("entry %d is not reachable by zoom from the view", i)
		}
	}
	t.Logf("%s: %d entries, %d nodes, %d model calls (%d of them group calls), view %d lines %d bytes", b.Name, total, len(all), comp.total()+groupCalls, groupCalls, v.Lines, v.Bytes)
}
