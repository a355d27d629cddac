package memory

import (
	"cmp"
	"context"
	"errors"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
)

// A view read from a process with nothing cached reads the identity and
// state items, the snapshot and the rows of the view's lines the snapshot
// lacks, which stay below snapshotRefresh plus the lines new since the
// view before; on the embedded store and on dynalite, turn after turn and
// through a merge batch, each view the one its rows give.
func TestAColdViewReadsTheSnapshotAndOnlyTheRowsBuiltSince(t *testing.T) {
	for _, v := range viewTargets(t) {
		t.Run(v.name, func(t *testing.T) {
			f := talkedChat(t, 500) // 2,000 messages: a view past its high mark
			v.sync(t, f)
			first := v.read(t, f, v.process(t, f))
			if lines := f.state(t).View.lines(); first.Items < int(lines)-10 {
				t.Fatalf("the first view read %s of %d lines: no chat to measure", first, lines)
			}
			warm := v.process(t, f)
			v.read(t, f, warm)
			before := f.state(t).View.nodes()
			merges := f.state(t).View.Merges
			batches := 0
			for turn := 0; turn < 48; turn++ {
				talk(t, f, 1)
				v.sync(t, f)
				st := f.state(t)
				now := st.View.nodes()
				seen := map[Node]bool{}
				for _, n := range before {
					seen[n] = true
				}
				added := 0
				for _, n := range now {
					if !seen[n] {
						added++
					}
				}
				if st.View.Merges != merges {
					batches++
					merges = st.View.Merges
				}
				cold := v.read(t, f, v.process(t, f))
				// Identity, state and snapshot; what the snapshot lacked
				// before this turn's lines; this turn's lines.
				if bound := 3 + snapshotRefresh - 1 + added; cold.Items > bound {
					t.Errorf("turn %d: a cold view read %s, over %d (%d lines new)", turn, cold, bound, added)
				}
				if hot := v.read(t, f, warm); hot.Items > 3+added {
					t.Errorf("turn %d: a warm view read %s, over %d", turn, hot, 3+added)
				}
				before = now
			}
			if batches == 0 {
				t.Fatal("no merge batch in 48 turns: the test covers less than it says")
			}
		})
	}
}

// snapshotFixture is a fixture whose chat's view has 40 built lines and a
// stored snapshot of them.
func snapshotFixture(t *testing.T) *fixture {
	t.Helper()
	f := talkedChat(t, 10)
	if _, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.table.Get(context.Background(), snapshotKey(f.ch())); err != nil {
		t.Fatalf("no snapshot after a view of %d lines: %v", f.state(t).View.lines(), err)
	}
	return f
}

// coldRead reads the view from a new process over f's table.
func coldRead(t *testing.T, f *fixture) wire.View {
	t.Helper()
	m, err := New(Config{Table: f.table, Transcript: f.log, Queue: &recQueue{}, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// putSnapshot stores body as f's chat's snapshot, over any stored.
func putSnapshot(t *testing.T, f *fixture, body []byte) {
	t.Helper()
	ctx := context.Background()
	it := store.Item{Key: snapshotKey(f.ch()), Body: body, Version: 1}
	old, err := f.table.Get(ctx, it.Key)
	if err == nil {
		it.Version = old.Version + 1
		err = f.table.Update(ctx, it)
	} else {
		err = f.table.Create(ctx, it)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The snapshot gives words only to nodes the state says are built and the
// view holds: the lines it holds for unbuilt leaves and for a node the
// view does not hold never show.
func TestASnapshotNeverFillsAPlaceholderNorShowsAnotherNode(t *testing.T) {
	f := snapshotFixture(t)
	// Logged, not built: the view ends in placeholders.
	for i := 0; i < 4; i++ {
		f.log.add(f.chat, "user", prose(1000+i, 900))
	}
	if err := f.m.Appended(context.Background(), f.ch(), 44); err != nil {
		t.Fatal(err)
	}
	st := f.state(t)
	var want []Node
	got := map[Node]nodeInfo{}
	for _, n := range st.View.nodes() {
		want = append(want, n)
		got[n] = nodeInfo{line: "FORGED " + n.Label()}
	}
	// And a node no view holds: the parent of the first 32 entries.
	want = append([]Node{{L: 5, I: 0}}, want...)
	got[Node{L: 5, I: 0}] = nodeInfo{line: "FORGED parent"}
	body, _, err := encodeSnapshot(0, want, got)
	if err != nil {
		t.Fatal(err)
	}
	putSnapshot(t, f, body)
	v := coldRead(t, f)
	if v.Unbuilt != 4 || v.Lines != 44 || strings.Count(v.View, Placeholder) != 4 || strings.Contains(v.View, "FORGED parent") {
		t.Fatalf("a forged snapshot changed the view's placeholders or nodes: %+v", brief(v))
	}
	for i := 40; i < 44; i++ {
		if strings.Contains(v.View, "FORGED "+Node{L: 0, I: int64(i)}.Label()) {
			t.Fatalf("unbuilt leaf %d shows the snapshot's line: %s", i, brief(v).View)
		}
	}
	// The lines it holds for built nodes are taken as theirs, since a
	// node's line never changes (forged here, so they show: the view
	// read them from the snapshot, not from the rows).
	if !strings.Contains(v.View, "\n0+1|FORGED 0+1\n") {
		t.Fatalf("the snapshot was not read: %s", brief(v).View)
	}
}

// An old snapshot only lacks lines: after more turns and a merge batch,
// a view from a new process is the one its rows give, and the snapshot is
// replaced once it lacks snapshotRefresh lines.
func TestAnOldSnapshotOnlyLacksLines(t *testing.T) {
	f := snapshotFixture(t)
	ctx := context.Background()
	old, err := f.table.Get(ctx, snapshotKey(f.ch()))
	if err != nil {
		t.Fatal(err)
	}
	merges := f.state(t).View.Merges
	for f.state(t).View.Merges == merges {
		talk(t, f, 8)
		if got, want := coldRead(t, f), rowsView(t, f); got != want {
			t.Fatalf("view over an old snapshot:\n got %+v\nwant %+v", brief(got), brief(want))
		}
	}
	now, err := f.table.Get(ctx, snapshotKey(f.ch()))
	if err != nil || now.Version <= old.Version {
		t.Fatalf("the snapshot was not replaced (version %d, was %d): %v", now.Version, old.Version, err)
	}
}

// A snapshot that cannot be read is left for the rows, and replaced.
func TestAnUnreadableSnapshotIsReadAsRowsAndReplaced(t *testing.T) {
	for _, body := range []string{"not deflate", ""} {
		f := snapshotFixture(t)
		putSnapshot(t, f, []byte(body))
		if got, want := coldRead(t, f), rowsView(t, f); got != want {
			t.Fatalf("view over an unreadable snapshot %q:\n got %+v\nwant %+v", body, brief(got), brief(want))
		}
		it, err := f.table.Get(context.Background(), snapshotKey(f.ch()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeSnapshot(it.Body); err != nil {
			t.Fatalf("the unreadable snapshot %q was not replaced: %v", body, err)
		}
	}
}

// A view of an incarnation its id no longer names writes no snapshot: a
// chat deleted under a view keeps nothing of it.
func TestAViewOfADeletedIncarnationWritesNoSnapshot(t *testing.T) {
	f := talkedChat(t, 10)
	ctx := context.Background()
	old := f.ch()
	st := f.state(t)
	// The chat is deleted and its id opened again, after the view read
	// its state.
	if _, err := chatid.New(f.table).Open(ctx, f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if cur := f.ch(); cur == old {
		t.Fatalf("the id still names %+v", old)
	}
	if _, err := f.m.render(ctx, old, st); err != nil {
		t.Fatal(err)
	}
	if _, err := f.table.Get(ctx, snapshotKey(old)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a snapshot was written for the deleted incarnation: %v", err)
	}
}

// A view whose lines pass the item budget keeps its first lines in the
// snapshot, and is not written again for the lines it cannot hold.
func TestASnapshotHoldsTheFirstLinesThatFitAndIsNotRewrittenForTheRest(t *testing.T) {
	var want []Node
	got := map[Node]nodeInfo{}
	for i := int64(0); i < 200; i++ {
		n := Node{L: 0, I: i}
		want = append(want, n)
		got[n] = nodeInfo{line: prose(int(i), maxLineBytes)}
	}
	body, held, err := encodeSnapshot(0, want, got)
	if err != nil {
		t.Fatal(err)
	}
	if n := held.lines(); n < 20 || n >= 200 || held.Runs[0].I != 0 {
		t.Fatalf("holds %d lines from %v: want the first that fit", n, held.Runs)
	}
	if size := (store.Item{Key: store.Key{PK: strings.Repeat("p", 300), SK: store.ViewSK}, Body: body}).Size(); size > store.ItemBudget {
		t.Fatalf("a snapshot of %d bytes passes the item budget", size)
	}
	decoded, err := decodeSnapshot(body)
	if err != nil || len(decoded.Lines) != int(held.lines()) || decoded.Lines[3].Line != got[Node{L: 0, I: 3}].line {
		t.Fatalf("decoded %d lines (%v), want %d", len(decoded.Lines), err, held.lines())
	}

	// A chat whose merges all fail keeps 200 leaves of 8 KB in its view.
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if !strings.HasSuffix(c.Label, "+1") {
			return Compacted{}, errors.New("merges are down")
		}
		return Compacted{Line: prose(len(c.Source), maxLineBytes), Attempts: 1, Model: "scripted"}, nil
	}
	for i := 0; i < 200; i++ {
		f.log.add(f.chat, "user", prose(i, 2*maxLineBytes))
	}
	if err := f.m.Appended(context.Background(), f.ch(), 200); err != nil {
		t.Fatal(err)
	}
	f.deliverAll(t)
	if st := f.state(t); st.unbuiltLeaves() != 0 || st.View.Size < 2*snapshotBytes {
		t.Fatalf("view of %d bytes, %d leaves unbuilt: not past the budget", st.View.Size, st.unbuiltLeaves())
	}
	coldRead(t, f)
	first, err := f.table.Get(context.Background(), snapshotKey(f.ch()))
	if err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	coldRead(t, f)
	coldRead(t, f)
	if again, _ := f.table.Get(context.Background(), snapshotKey(f.ch())); again.Version != first.Version {
		t.Fatalf("views of an unchanged chat wrote the snapshot again: version %d, was %d", again.Version, first.Version)
	}
}

// onTable is a fixture whose processes share table: f.m and those more
// gives, each with its own line cache and what it knows of the snapshot,
// all building from the fixture's queue with its compactor.
func onTable(t *testing.T, table store.Table) (f *fixture, more func() *Memory) {
	t.Helper()
	f = newFixture(t)
	f.comp.lineLen = turnLineBytes
	more = func() *Memory {
		m, err := New(Config{Table: table, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	f.m = more()
	return f, more
}

// A new line shows in the next view of every process, whichever process
// built it and whichever wrote the snapshot: two processes over one table
// (the embedded store, dynalite) take turns building a chat's turns and
// each reads the view after every turn, as does a new process; each view
// is the one the state and its rows give, the snapshot replaced under
// both meanwhile.
func TestASnapshotNeverShowsAStaleViewAcrossProcesses(t *testing.T) {
	for _, v := range viewTargets(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			f, more := onTable(t, v.table)
			procs := []*Memory{f.m, more()}
			talk(t, f, 10)
			var first int64
			for turn := 0; turn < 24; turn++ {
				f.m = procs[turn%2]
				talk(t, f, 1)
				want := rowsView(t, f)
				if want.Unbuilt != 0 {
					t.Fatalf("turn %d: %d lines unbuilt: the test reads no new line", turn, want.Unbuilt)
				}
				for i, m := range append(procs, more()) {
					got, err := m.ReadView(ctx, f.tenant, f.chat, false)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("turn %d, process %d: the view is not the one its state and rows give:\n got %+v\nwant %+v", turn, i, brief(got), brief(want))
					}
				}
				if it, err := v.table.Get(ctx, snapshotKey(f.ch())); err == nil && first == 0 {
					first = it.Version
				}
			}
			it, err := v.table.Get(ctx, snapshotKey(f.ch()))
			if err != nil || first == 0 || it.Version < first+2 {
				t.Fatalf("the snapshot went from version %d to %d (%v): the test replaced it less than it says", first, it.Version, err)
			}
		})
	}
}

// A view read while lines are built is never older than what landed
// before it began: viewers in three processes (two keeping their caches,
// one new each time) read the view over and over while a fourth builds
// turn after turn. Each view shows every message whose line the state
// held as built before it began, a placeholder only for one it did not,
// and for every line the line of its node's row.
func TestAViewRacingBuildsIsNeverStale(t *testing.T) {
	for _, v := range viewTargets(t) {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			f, more := onTable(t, v.table)
			talk(t, f, 10)
			if _, err := f.m.ReadView(ctx, f.tenant, f.chat, false); err != nil {
				t.Fatal(err)
			}
			old, err := v.table.Get(ctx, snapshotKey(f.ch()))
			if err != nil {
				t.Fatal(err)
			}
			type seen struct {
				landed int64 // messages built before the view began
				view   wire.View
			}
			// landed is how many messages, from the first on, the
			// state's built lines cover once a turn is built; turn
			// counts the turns built.
			var landed, turn atomic.Int64
			land := func() {
				st := f.state(t)
				var end int64
				for _, n := range st.View.nodes() {
					if !st.built(n) {
						break
					}
					end = n.End()
				}
				landed.Store(end)
			}
			land()
			var (
				mu    sync.Mutex
				views []seen
				wg    sync.WaitGroup
				stop  = make(chan struct{})
			)
			procs := []*Memory{more(), more(), nil}
			for _, keep := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// At most perTurn views a turn: enough to race every
					// build, few enough to check.
					const perTurn = 30
					last, reads := int64(-1), 0
					for {
						select {
						case <-stop:
							return
						default:
						}
						if t := turn.Load(); t != last {
							last, reads = t, 0
						}
						if reads++; reads > perTurn {
							time.Sleep(time.Millisecond)
							continue
						}
						m := keep
						if m == nil {
							m = more()
						}
						before := landed.Load()
						got, err := m.ReadView(ctx, f.tenant, f.chat, false)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						views = append(views, seen{before, got})
						mu.Unlock()
					}
				}()
			}
			for range 16 {
				talk(t, f, 1)
				land()
				turn.Add(1)
			}
			close(stop)
			wg.Wait()
			if now, err := v.table.Get(ctx, snapshotKey(f.ch())); err != nil || now.Version <= old.Version {
				t.Fatalf("the snapshot was not replaced while views raced the builds (version %d, was %d): %v", now.Version, old.Version, err)
			}

			type line struct {
				n    Node
				text string
			}
			parsed := make([][]line, len(views))
			var nodes []Node
			for k, s := range views {
				body := strings.TrimSuffix(strings.TrimPrefix(s.view.View, "<chat>\n"), "</chat>")
				var end int64
				for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
					label, text, _ := strings.Cut(l, "|")
					start, count, _ := strings.Cut(label, "+")
					s, _ := strconv.ParseInt(start, 10, 64)
					c, _ := strconv.ParseInt(count, 10, 64)
					n := Node{L: bits.TrailingZeros64(uint64(c)), I: s / max(c, 1)}
					if n.Label() != label || n.Start() != end {
						t.Fatalf("view %d: line %q does not follow %d entries", k, l, end)
					}
					end = n.End()
					parsed[k] = append(parsed[k], line{n, text})
					nodes = append(nodes, n)
				}
				if end < s.landed {
					t.Fatalf("view %d covers %d messages, %d landed before it: %s", k, end, s.landed, brief(s.view).View)
				}
			}
			slices.SortFunc(nodes, func(a, b Node) int { return cmp.Or(cmp.Compare(a.L, b.L), cmp.Compare(a.I, b.I)) })
			rows := cachelessRows(t, f, slices.Compact(nodes))
			for k, ls := range parsed {
				for _, l := range ls {
					if l.text == Placeholder {
						if l.n.End() <= views[k].landed {
							t.Fatalf("view %d: %s is a placeholder, built before the view began", k, l.n.Label())
						}
						continue
					}
					if r, ok := rows[l.n]; !ok || r.line != l.text {
						t.Fatalf("view %d: %s shows %q, its row %q", k, l.n.Label(), l.text, r.line)
					}
				}
			}
			t.Logf("%d views while 16 turns were built", len(views))
			if len(views) < 16 {
				t.Fatalf("%d views in 16 turns: the race is not run", len(views))
			}
		})
	}
}
