package memory

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durachat/durachat/client/wire"
)

func TestWaitPollIsFastWhileATurnsBuildsLandThenBacksOff(t *testing.T) {
	for _, tc := range []struct {
		elapsed, want time.Duration
	}{
		{0, waitFirstPoll},
		{waitFirstFor - time.Millisecond, waitFirstPoll},
		{waitFirstFor, waitFastPoll},
		{time.Second, waitFastPoll},
		{waitFastFor - time.Millisecond, waitFastPoll},
		{waitFastFor, waitFastPoll},
		{waitFastFor + 800*time.Millisecond, waitFastPoll + 100*time.Millisecond},
		{waitFastFor + 4*time.Second, waitFastPoll + 500*time.Millisecond},
		{waitFastFor + 10*time.Second, waitSlowPoll},
		{time.Hour, waitSlowPoll},
	} {
		if got := waitPoll(tc.elapsed); got != tc.want {
			t.Errorf("waitPoll(%s) = %s, want %s", tc.elapsed, got, tc.want)
		}
	}
}

// otherProcess is a second Memory over f's stores, as the compact
// function is beside the memory function: it shares no notifier with f.m,
// so a line it lands reaches f.m's waiting views only through the table.
func (f *fixture) otherProcess(t testing.TB) *Memory {
	t.Helper()
	// Its own counters over the same rows: the reads f.table counts are
	// f.m's.
	m, err := New(Config{Table: &memTable{Table: f.table.Table}, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// buildIn builds every queued message in m, and what those queue.
func (f *fixture) buildIn(t testing.TB, m *Memory) {
	t.Helper()
	for msgs := f.queue.take(); len(msgs) > 0; msgs = f.queue.take() {
		for _, s := range msgs {
			if err := m.Build(context.Background(), s.msg.Tenant, s.msg.Chat, s.msg.L, s.msg.I); err != nil {
				t.Errorf("build %d/%d: %v", s.msg.L, s.msg.I, err)
			}
		}
	}
}

// waitResult is what a waiting view answered and how many state reads it
// made.
type waitResult struct {
	view  wire.View
	err   error
	reads int64
	at    time.Time
}

// waitView starts a view?wait=turn of f's chat in f.m; started is closed
// once its first read of the state is done.
func (f *fixture) waitView() <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		before := f.table.gets.Load()
		v, err := f.m.ReadView(context.Background(), f.tenant, f.chat, true)
		out <- waitResult{view: v, err: err, reads: f.table.gets.Load() - before, at: time.Now()}
	}()
	return out
}

func TestAWaitingViewSeesALineLandedInAnotherProcess(t *testing.T) {
	f := newFixture(t)
	f.m.wait = time.Minute // the answer must come from the landing, not the bound
	other := f.otherProcess(t)
	f.append(t, "user", long(0))
	res := f.waitView()
	time.Sleep(100 * time.Millisecond) // the view is waiting
	f.buildIn(t, other)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.view.Unbuilt != 0 || r.view.Stalled {
		t.Fatalf("view %+v: want every line built", r.view)
	}
}

// TestAWaitingViewsReadsAreBoundedBySchedule: a wait that nothing ends
// reads the state item no more often than waitPoll says, plus the
// scheduler's own run every 5 s.
func TestAWaitingViewsReadsAreBoundedBySchedule(t *testing.T) {
	f := newFixture(t)
	f.m.wait = time.Second
	f.append(t, "user", long(0)) // queued, never built
	r := <-f.waitView()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.view.Unbuilt != 1 {
		t.Fatalf("view %+v: want its one line unbuilt", r.view)
	}
	// The first pump reads the identity, the log's length and the state;
	// the wait then reads the state every waitFirstPoll, then every
	// waitFastPoll.
	max := 3 + int64(waitFirstFor/waitFirstPoll) + int64((f.m.wait-waitFirstFor)/waitFastPoll) + 1
	if r.reads < 3 || r.reads > max {
		t.Errorf("a %s wait made %d table reads, want 3 to %d", f.m.wait, r.reads, max)
	}
}

// BenchmarkViewWakesAfterALineLands measures how long after a build lands
// its line a view waiting for it answers, when the build runs in the
// view's process (it wakes the view) and in another one (the view reads
// the state on its schedule), and the table reads the view made (in the
// same process, the build's reads are counted too). The build is the fake
// compactor's, a few microseconds; the view waits for it 45 ms, or 1.5 s
// (a model call's time).
func BenchmarkViewWakesAfterALineLands(b *testing.B) {
	for _, bc := range []struct {
		name  string
		other bool
		after time.Duration
	}{
		{"same process", false, 45 * time.Millisecond},
		{"other process", true, 45 * time.Millisecond},
		{"other process after 1.5 s", true, 1500 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b)
			f.m.wait = time.Minute
			builder := f.m
			if bc.other {
				builder = f.otherProcess(b)
			}
			var wake time.Duration
			var reads int64
			for i := 0; i < b.N; i++ {
				f.append(b, "user", long(i))
				res := f.waitView()
				// The view waits before the build lands, as a host's view
				// waits for the compact function.
				time.Sleep(bc.after)
				landing := time.Now()
				f.buildIn(b, builder)
				r := <-res
				if r.err != nil || r.view.Unbuilt != 0 {
					b.Fatalf("view %+v, %v", r.view, r.err)
				}
				wake += r.at.Sub(landing)
				reads += r.reads
			}
			b.ReportMetric(float64(wake.Microseconds())/1000/float64(b.N), "ms-to-answer")
			b.ReportMetric(float64(reads)/float64(b.N), "reads/wait")
		})
	}
}

// TestAViewWaitLeavesTimeToAnswerBeforeItsRequestsDeadline: a wait ends
// renderReserve before the request's deadline (a Lambda invocation's), so
// the view answers with what is built instead of running into the deadline
// and failing.
func TestAViewWaitLeavesTimeToAnswerBeforeItsRequestsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound time.Duration
		left  time.Duration // until the deadline; 0: none
		want  time.Duration
	}{
		{"no deadline: the bound", 20 * time.Second, 0, 20 * time.Second},
		{"a far deadline: the bound", 20 * time.Second, time.Minute, 20 * time.Second},
		{"a near deadline: the reserve left", 20 * time.Second, 10 * time.Second, 7 * time.Second},
		{"a deadline inside the reserve: no wait", 20 * time.Second, time.Second, 0},
	} {
		// synctest's clock stands still while waitFor reads it.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				if tc.left > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.left)
					defer cancel()
				}
				if got := waitFor(ctx, tc.bound); got != tc.want {
					t.Errorf("waitFor = %s, want %s", got, tc.want)
				}
			})
		})
	}

	f := newFixture(t)
	f.m.wait = time.Minute
	f.append(t, "user", long(0)) // queued, never built
	ctx, cancel := context.WithTimeout(context.Background(), renderReserve+500*time.Millisecond)
	defer cancel()
	v, err := f.m.ReadView(ctx, f.tenant, f.chat, true)
	if err != nil {
		t.Fatalf("a wait near its deadline failed: %v", err)
	}
	if v.Unbuilt != 1 || ctx.Err() != nil {
		t.Fatalf("view %+v, ctx %v: want the unbuilt line answered before the deadline", v, ctx.Err())
	}
}

// A waiting view counts the age of the builds it waits for: a build that
// has run long (a model call that hangs, a view asked again meanwhile)
// puts the wait on the slow schedule at once, while a leaf whose build
// has not started (it may land any moment) keeps the wait's own age.
func TestAWaitCountsTheAgeOfTheBuildsItWaitsFor(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	const lease = 3 * time.Minute
	started := func(i int64, ago time.Duration) claim {
		return claim{L: 0, I: i, Owner: "builder", Until: now.Add(lease - ago).UnixMilli()}
	}
	for _, tc := range []struct {
		name string
		st   chatState
		want time.Duration
	}{
		{"nothing unbuilt", chatState{T: 2, Levels: []level{{Done: 2}}}, 0},
		{"a leaf not claimed yet", chatState{T: 1}, 0},
		{"a leaf sent, its build not started", chatState{T: 1, Claims: []claim{{L: 0, I: 0, Until: now.Add(lease).UnixMilli()}}}, 0},
		{"a build started 40 s ago", chatState{T: 1, Claims: []claim{started(0, 40*time.Second)}}, 40 * time.Second},
		{"the youngest of two builds", chatState{T: 2, Claims: []claim{started(0, 40*time.Second), started(1, 2*time.Second)}}, 2 * time.Second},
		{"one build old, the other leaf not started", chatState{T: 2, Claims: []claim{started(0, 40*time.Second)}}, 0},
		{"a leaf built out of order is not waited for", chatState{T: 2, Levels: []level{{Done: 0, More: []int64{1}}}, Claims: []claim{started(0, 40*time.Second)}}, 40 * time.Second},
		{"more unbuilt leaves than it looks at", chatState{T: 100, Claims: []claim{started(0, 40*time.Second)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.awaitedBuildAge(now, lease); got != tc.want {
				t.Errorf("awaitedBuildAge = %s, want %s", got, tc.want)
			}
		})
	}
}

// A view asked again for a leaf whose build started long ago (a model
// call that hangs) reads the state on the slow schedule from its start,
// not every waitFastPoll.
func TestAWaitForALongRunningBuildReadsOnTheSlowSchedule(t *testing.T) {
	f := newFixture(t)
	f.m.wait = time.Second
	f.append(t, "user", long(0))
	f.queue.take() // another process holds the build message
	started := f.clock.Now().Add(-40 * time.Second)
	claimed := 0
	if _, err := f.m.states.update(context.Background(), f.ch(), func(st *chatState) error {
		claimed = len(st.Claims)
		for k := range st.Claims {
			st.Claims[k].Owner = "builder"
			st.Claims[k].Until = started.Add(f.m.claimLease).UnixMilli()
		}
		return nil
	}); err != nil || claimed != 1 {
		t.Fatalf("claiming the leaf's build: %d claims, %v", claimed, err)
	}
	r := <-f.waitView()
	if r.err != nil || r.view.Unbuilt != 1 {
		t.Fatalf("view %+v, %v: want its one line unbuilt", r.view, r.err)
	}
	// The first pump's 3 reads, then one every waitPoll(40 s), over 1 s.
	max := 3 + int64(f.m.wait/waitPoll(40*time.Second)) + 1
	if r.reads > max {
		t.Errorf("a %s wait for a build 40 s old made %d table reads, want at most %d", f.m.wait, r.reads, max)
	}
}
