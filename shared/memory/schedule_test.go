package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
)

// long is a source the compactor must shorten.
func long(i int) string { return fmt.Sprintf("%d %s", i, strings.Repeat("long text ", 80)) }

func longs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = long(i)
	}
	return out
}

func build(t *testing.T, f *fixture, n Node) error {
	t.Helper()
	return f.m.Build(context.Background(), f.tenant, f.chat, n.L, n.I)
}

func TestAtMostEightBuildsInFlight(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", longs(100)...)
	first := f.queue.take()
	if len(first) != MaxInFlight {
		t.Fatalf("%d builds sent for 100 new entries, want %d", len(first), MaxInFlight)
	}
	if st := f.state(t); len(st.Claims) != MaxInFlight {
		t.Fatalf("%d claims", len(st.Claims))
	}
	// More appends and API calls send nothing while eight are in flight.
	f.append(t, "user", long(100))
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if more := f.queue.take(); len(more) != 0 {
		t.Fatalf("%d more builds sent with eight in flight", len(more))
	}
	// Each finished build frees one slot.
	if err := build(t, f, nodesOf(first)[0]); err != nil {
		t.Fatal(err)
	}
	if next := f.queue.take(); len(next) != 1 {
		t.Fatalf("a finished build sent %d, want 1", len(next))
	}
}

func TestLeavesStartBeforeMerges(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", longs(16)...)
	sent := f.queue.take() // leaves 0..7
	for _, n := range nodesOf(sent)[:2] {
		if err := build(t, f, n); err != nil {
			t.Fatal(err)
		}
	}
	// Leaves 0 and 1 are built, so merge 0+2 is ready, but leaves come first.
	next := nodesOf(f.queue.take())
	if labels(next) != "8+1, 9+1" {
		t.Fatalf("after two leaves the scheduler sent %s, want leaves 8+1, 9+1", labels(next))
	}
	// Once every leaf is built or in flight, merges go.
	rest := append(nodesOf(sent)[2:], next...)
	for _, n := range rest {
		if err := build(t, f, n); err != nil {
			t.Fatal(err)
		}
	}
	var kinds []string
	for _, n := range nodesOf(f.queue.take()) {
		kinds = append(kinds, n.Label())
	}
	got := strings.Join(kinds, ", ")
	if !strings.HasPrefix(got, "10+1, 11+1, 12+1, 13+1, 14+1, 15+1") || !strings.Contains(got, "0+2") {
		t.Errorf("sent %s; want the last leaves first, then merges", got)
	}
}

func TestLeafStartsOnlyOnceFewerThanEightLinesBeforeItAreUnbuilt(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		return Compacted{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
	}
	f.append(t, "user", longs(20)...)
	later := f.deliverAll(t)
	if len(later) != MaxInFlight {
		t.Fatalf("%d builds failed, want the first %d", len(later), MaxInFlight)
	}
	st := f.state(t)
	// Nothing runs, yet leaf 8 may not start: eight lines before it are unbuilt.
	if len(st.Claims) != 0 || st.waiting() != MaxInFlight {
		t.Fatalf("claims %d, waiting %d", len(st.Claims), st.waiting())
	}
	for _, s := range later {
		if s.msg.I >= Lead {
			t.Errorf("leaf %d started with %d unbuilt lines before it", s.msg.I, s.msg.I)
		}
	}
	// Leaf 0 built: now leaf 8 has seven unbuilt lines before it.
	f.comp.script = nil
	f.clock.Add(DefaultRetry)
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	var sentNow []string
	for _, s := range f.queue.take() {
		sentNow = append(sentNow, Node{s.msg.L, s.msg.I}.Label())
	}
	if got := strings.Join(sentNow, ", "); !strings.Contains(got, "8+1") || strings.Contains(got, "9+1") {
		t.Errorf("after leaf 0 the scheduler sent %s; want 8+1 and not 9+1", got)
	}
}

func TestFailedBuildIsRetriedTenSecondsLater(t *testing.T) {
	f := newFixture(t)
	fails := 1
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if fails > 0 {
			fails--
			return Compacted{}, &model.Error{Retryable: true, Status: 503, Err: errors.New("overloaded")}
		}
		return Compacted{Line: "summary of " + c.Label, Attempts: 1}, nil
	}
	f.append(t, "user", long(0))
	msg := f.queue.take()
	err := build(t, f, nodesOf(msg)[0])
	var re *RetryError
	if !errors.As(err, &re) || re.After != DefaultRetry {
		t.Fatalf("failed build returned %v, want a retry in %s", err, DefaultRetry)
	}
	st := f.state(t)
	if st.waiting() != 1 || len(st.Claims) != 0 || !st.stalled() || !strings.Contains(st.LastError, "overloaded") {
		t.Fatalf("after the failure: waiting %d, claims %d, last error %q", st.waiting(), len(st.Claims), st.LastError)
	}
	if got := st.Retries[0].At - f.clock.Now().UnixMilli(); got != DefaultRetry.Milliseconds() {
		t.Fatalf("retry due in %d ms", got)
	}
	// Nine seconds on, neither an API call nor an early delivery builds it.
	f.clock.Add(9 * time.Second)
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if n := len(f.queue.take()); n != 0 {
		t.Fatalf("%d builds sent before the retry delay", n)
	}
	if err := build(t, f, Node{0, 0}); !errors.As(err, &re) || re.After != time.Second {
		t.Fatalf("early delivery returned %v, want a retry in the second left", err)
	}
	// At ten seconds the next API call sends it again, and it builds.
	f.clock.Add(time.Second)
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if again := f.queue.take(); len(again) != 1 || again[0].msg.I != 0 {
		t.Fatalf("sent %v at the retry time", again)
	}
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	if row, ok := f.row(t, Node{0, 0}); !ok || row.Text != "summary of 0+1" {
		t.Fatalf("leaf = %+v", row)
	}
	if st := f.state(t); len(st.Retries) != 0 || st.stalled() {
		t.Errorf("retry entry left after the build: %+v", st.Retries)
	}
}

func TestStoreAndReadErrorsAreRetriedForever(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0))
	f.queue.take()
	f.log.fail = store.Unavailable("query", errors.New("log is down"))
	for k := 0; k < 2*RefusalLimit; k++ {
		f.clock.Add(DefaultRetry)
		if err := build(t, f, Node{0, 0}); err == nil {
			t.Fatal("build succeeded with the log down")
		}
	}
	st := f.state(t)
	if st.Retries[0].Failures != 2*RefusalLimit || st.Retries[0].Refusals != 0 || st.MechanicalCount != 0 {
		t.Fatalf("retry entry %+v; an outage must never give a mechanical line", st.Retries[0])
	}
	f.log.fail = nil
	f.clock.Add(DefaultRetry)
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	if row, _ := f.row(t, Node{0, 0}); row.Mechanical || row.Text == "" {
		t.Errorf("row after the outage: %+v", row)
	}
}

func TestRefusedThreeTimesGetsAMarkedMechanicalLine(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		return Compacted{}, &model.Error{Refused: true, Err: errors.New("declined")}
	}
	f.append(t, "user", long(0))
	f.queue.take()
	for k := 1; k < RefusalLimit; k++ {
		if err := build(t, f, Node{0, 0}); err == nil {
			t.Fatalf("refusal %d built the node", k)
		}
		f.clock.Add(DefaultRetry)
	}
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatalf("third refusal: %v", err)
	}
	row, ok := f.row(t, Node{0, 0})
	if !ok || !row.Mechanical || !strings.HasPrefix(row.Text, "[mechanical:") || len(row.Text) > LineBytes {
		t.Fatalf("row = %+v", row)
	}
	if f.comp.callsOf("0+1") != RefusalLimit {
		t.Errorf("%d model calls, want %d", f.comp.callsOf("0+1"), RefusalLimit)
	}
	s, err := f.m.Status(context.Background(), f.tenant, f.chat)
	if err != nil {
		t.Fatal(err)
	}
	if s.MechanicalCount != 1 || len(s.Mechanical) != 1 || s.Mechanical[0].Node != "0+1" || s.Mechanical[0].Line != row.Text {
		t.Errorf("status mechanical = %+v", s.Mechanical)
	}
}

func TestDeadBuildersClaimIsRetakenAfterItsLease(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0))
	f.queue.take()
	// A builder took the claim and died.
	if _, err := f.m.states.update(context.Background(), f.ch(), func(st *chatState) error {
		st.Claims[0].Owner = "dead"
		st.Claims[0].Until = f.clock.Now().Add(f.m.claimLease).UnixMilli()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Its message, delivered again while the lease runs, builds nothing.
	if err := build(t, f, Node{0, 0}); err != nil || f.comp.total() != 0 {
		t.Fatalf("duplicate during the lease: err %v, %d calls", err, f.comp.total())
	}
	f.clock.Add(f.m.claimLease - time.Second)
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if n := len(f.queue.take()); n != 0 {
		t.Fatalf("claim retaken %d times before its lease ran out", n)
	}
	f.clock.Add(time.Second)
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	again := f.queue.take()
	if len(again) != 1 {
		t.Fatalf("after the lease %d builds sent, want 1", len(again))
	}
	f.queue.msgs = append(f.queue.msgs, again...)
	f.deliverAll(t)
	if _, ok := f.row(t, Node{0, 0}); !ok || f.comp.callsOf("0+1") != 1 {
		t.Errorf("leaf not built once after the lease: %d calls", f.comp.callsOf("0+1"))
	}
}

func TestRedeliveredMessageDoesNotBuildTwice(t *testing.T) {
	f := newFixture(t)
	f.comp.delay = 50 * time.Millisecond
	f.append(t, "user", long(0))
	msg := f.queue.take()[0].msg
	// Two deliveries at once (SQS delivers at least once), and one later.
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.m.Build(context.Background(), msg.Tenant, msg.Chat, msg.L, msg.I); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	if n := f.comp.callsOf("0+1"); n != 1 {
		t.Errorf("the compactor was called %d times for one node", n)
	}
	if st := f.state(t); st.Built != 1 || st.View.Size != lineSize(Node{0, 0}, 120) {
		t.Errorf("state counts %d built, view %d bytes", st.Built, st.View.Size)
	}
}

func TestRowWrittenByADeadBuilderIsNotBuiltAgain(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0))
	f.queue.take()
	// The row exists, but its builder died before recording it.
	body := `{"t":"written before a crash"}`
	if err := f.table.Create(context.Background(), store.Item{Key: nodeKey(f.ch(), Node{0, 0}), Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	if f.comp.total() != 0 || !f.state(t).built(Node{0, 0}) {
		t.Errorf("%d calls; built %v", f.comp.total(), f.state(t).built(Node{0, 0}))
	}
	v, _ := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if !strings.Contains(v.View, "0+1|written before a crash") {
		t.Errorf("view %q", v.View)
	}
}

func TestLostQueueMessageIsRefoundByTheNextAPICall(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0), long(1))
	f.queue.take() // lost
	f.clock.Add(f.m.claimLease)
	// Any API call on the chat runs the scheduler: here, reading the view.
	if _, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false); err != nil {
		t.Fatal(err)
	}
	if again := f.queue.take(); labels(nodesOf(again)) != "0+1, 1+1" {
		t.Fatalf("re-sent %s", labels(nodesOf(again)))
	} else {
		f.queue.msgs = again
	}
	f.deliverAll(t)
	if st := f.state(t); st.Built != 3 {
		t.Errorf("%d nodes built, want 3", st.Built)
	}
}

func TestLostAppendNoticeIsCaughtUpByTheNextAPICall(t *testing.T) {
	f := newFixture(t)
	f.log.add(f.chat, "user", "logged, but memory never heard")
	v, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Lines != 1 || len(f.queue.take()) != 1 {
		t.Errorf("view has %d lines", v.Lines)
	}
}

func TestQueueOutageReleasesTheClaims(t *testing.T) {
	f := newFixture(t)
	f.queue.fail = store.Unavailable("send", errors.New("queue down"))
	f.log.add(f.chat, "user", "x")
	if err := f.m.Appended(context.Background(), f.ch(), 1); err == nil {
		t.Fatal("a queue outage went unreported")
	}
	if st := f.state(t); len(st.Claims) != 0 || !strings.Contains(st.LastError, "queue") {
		t.Fatalf("claims %d after the send failed; last error %q", len(st.Claims), st.LastError)
	}
	f.queue.fail = nil
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if n := len(f.queue.take()); n != 1 {
		t.Errorf("%d sent once the queue is back", n)
	}
}

func TestAChatsNewBuildsAreQueuedInOneRequest(t *testing.T) {
	f := newFixture(t)
	texts := make([]string, 25)
	for i := range texts {
		texts[i] = long(i)
	}
	f.append(t, "user", texts...)
	sent := f.queue.take()
	if len(sent) != MaxInFlight {
		t.Fatalf("%d builds queued for 25 new leaves, want MaxInFlight (%d)", len(sent), MaxInFlight)
	}
	if want := []int{MaxInFlight}; !slices.Equal(f.queue.batches, want) {
		t.Errorf("sent in batches of %v, want %v: one request", f.queue.batches, want)
	}
}

func TestABatchEntryNotSentReleasesOnlyItsClaim(t *testing.T) {
	f := newFixture(t)
	f.queue.refuse = func(body string) bool { return strings.Contains(body, `"i":1}`) }
	f.log.add(f.chat, "user", "x")
	f.log.add(f.chat, "user", "y")
	if err := f.m.Appended(context.Background(), f.ch(), 2); err == nil {
		t.Fatal("a refused batch entry went unreported")
	}
	st := f.state(t)
	if len(st.Claims) != 1 || st.Claims[0].I != 0 || !strings.Contains(st.LastError, "queue") {
		t.Fatalf("claims %+v after entry 1 was refused, want only leaf 0's; last error %q", st.Claims, st.LastError)
	}
	if sent := f.queue.take(); len(sent) != 1 || sent[0].msg.I != 0 {
		t.Fatalf("sent %+v, want leaf 0's build only", sent)
	}
	f.queue.refuse = nil
	if err := f.m.Pump(context.Background(), f.tenant, f.chat); err != nil {
		t.Fatal(err)
	}
	if sent := f.queue.take(); len(sent) != 1 || sent[0].msg.I != 1 {
		t.Errorf("sent %+v once the queue takes it, want leaf 1's build", sent)
	}
}

func TestSchedulerStateStaysSmallAsTheChatGrows(t *testing.T) {
	// The state holds the frontier, not the log: its size is about the same
	// at 1,000 and 10,000 entries.
	sizes := map[int]int{}
	f := newFixture(t)
	n := 0
	for _, at := range []int{1000, 10000} {
		for ; n < at; n++ {
			f.log.add(f.chat, "user", fmt.Sprintf("m%d", n))
		}
		if err := f.m.Appended(context.Background(), f.ch(), int64(n)); err != nil {
			t.Fatal(err)
		}
		f.deliverAll(t)
		sizes[at] = f.table.stateBytes(f.ch())
	}
	if sizes[10000] > 4*sizes[1000]+2000 || sizes[10000] > 64<<10 {
		t.Errorf("state item: %d bytes at 1,000 entries, %d at 10,000", sizes[1000], sizes[10000])
	}
}

func TestARowWrittenButNotRecordedIsRecordedByTheNextDelivery(t *testing.T) {
	// The next delivery comes while the claim is live (a duplicate, or the
	// build's own message back) or after its lease lapsed (the scheduler
	// retakes the node): either way it records the row without a model
	// call, and the status counts the call that wrote the row.
	for _, tc := range []struct {
		name   string
		lapsed bool
	}{
		{"while its claim is live", false},
		{"after its lease lapsed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.append(t, "user", long(0))
			f.queue.take()
			// The build writes its row, then the state write that records
			// it fails (DynamoDB throttling past the SDK's retries).
			var rowWritten, failed atomic.Bool
			f.table.setFail(func(op string, k store.Key) error {
				switch {
				case op == "create" && k == nodeKey(f.ch(), Node{0, 0}):
					rowWritten.Store(true)
				case op == "update" && rowWritten.Load() && !failed.Swap(true):
					return store.Unavailable("update", errors.New("ThrottlingException"))
				}
				return nil
			})
			var retry *RetryError
			if err := build(t, f, Node{0, 0}); !errors.As(err, &retry) {
				t.Fatalf("build whose record failed = %v, want a RetryError", err)
			}
			if _, ok := f.row(t, Node{0, 0}); !ok {
				t.Fatal("the row was not written")
			}
			if tc.lapsed {
				f.clock.Add(f.m.claimLease + time.Second)
			}
			if err := build(t, f, Node{0, 0}); err != nil {
				t.Fatal(err)
			}
			s, err := f.m.Status(context.Background(), f.tenant, f.chat)
			if err != nil {
				t.Fatal(err)
			}
			if s.Unbuilt != 0 || s.Built != 1 || f.comp.callsOf("0+1") != 1 {
				t.Fatalf("after the redelivery: %d unbuilt, %d built, %d model calls; want the leaf built by one call", s.Unbuilt, s.Built, f.comp.callsOf("0+1"))
			}
			if s.ModelCalls != 1 || s.Verbatim != 0 {
				t.Errorf("status counts %d model calls and %d verbatim, the compactor saw %d calls", s.ModelCalls, s.Verbatim, f.comp.total())
			}
		})
	}
}

func TestAModelCallThatLostTheRaceToWriteTheRowIsCounted(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0))
	f.queue.take()
	// While the first build waits on the model, its lease lapses and a
	// second build takes the node, calls the model and writes the row.
	var second atomic.Bool
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if !second.Swap(true) {
			f.clock.Add(f.m.claimLease + time.Second)
			if err := build(t, f, Node{0, 0}); err != nil {
				t.Errorf("second build: %v", err)
			}
		}
		return Compacted{Line: "line of " + c.Label, Attempts: 1, Model: "scripted"}, nil
	}
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	s, err := f.m.Status(context.Background(), f.tenant, f.chat)
	if err != nil {
		t.Fatal(err)
	}
	if f.comp.callsOf("0+1") != 2 || s.Built != 1 {
		t.Fatalf("%d compactor calls, %d built; want two builds racing past the lease to one row", f.comp.callsOf("0+1"), s.Built)
	}
	if s.ModelCalls != 2 {
		t.Errorf("status counts %d model calls, the compactor saw %d", s.ModelCalls, f.comp.total())
	}
}

// A state write whose answer was lost, sent again by the store's client,
// fails its condition against itself. The write stands: the builds it
// claimed are sent, and a build that claimed its node goes on to build it,
// rather than the claim waiting out its lease with nothing sent.
func TestAStateWriteWhoseAnswerWasLostStillActsOnWhatItWrote(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   string // the first state write of this kind loses its answer
		when func(f *fixture, t *testing.T)
	}{
		{"TheFirstAppendsClaims", "create", func(f *fixture, t *testing.T) {
			f.append(t, "user", long(0), long(1))
		}},
		{"ALaterAppendsClaims", "update", func(f *fixture, t *testing.T) {
			f.table.setLose(nil)
			f.append(t, "user", long(0))
			f.queue.msgs = nil // lost: found again below, when the lease lapses
			f.clock.Add(f.m.claimLease)
			f.table.setLose(loseOnce("update"))
			f.append(t, "user", long(1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.table.setLose(loseOnce(tc.op))
			tc.when(f, t)
			if got := labels(nodesOf(f.queue.msgs)); got != "0+1, 1+1" {
				t.Fatalf("queued %q, want both leaves", got)
			}
			f.deliverAll(t)
			if st := f.state(t); st.Built != 3 || len(st.Claims) != 0 {
				t.Errorf("%d nodes built, %d claims left; want 3 built, none left", st.Built, len(st.Claims))
			}
		})
	}
	t.Run("ABuildsOwnClaim", func(t *testing.T) {
		f := newFixture(t)
		f.append(t, "user", long(0), long(1))
		msgs := f.queue.take()
		f.table.setLose(loseOnce("update"))
		for _, s := range msgs {
			if err := f.m.Build(context.Background(), s.msg.Tenant, s.msg.Chat, s.msg.L, s.msg.I); err != nil {
				t.Fatalf("build %d+%d: %v", s.msg.I, 1, err)
			}
		}
		f.table.setLose(nil)
		f.deliverAll(t)
		if st := f.state(t); st.Built != 3 || len(st.Claims) != 0 {
			t.Errorf("%d nodes built, %d claims left; want 3 built, none left", st.Built, len(st.Claims))
		}
	})
}

// loseOnce answers the first state write of op, which it lets commit, as
// a client does that sent it again after its answer was lost: with a
// failed condition.
func loseOnce(op string) func(string, store.Key) error {
	return answerOnce(op, store.ErrConditionFailed)
}

// answerOnce answers the first state write of op, which it lets commit,
// with err.
func answerOnce(op string, err error) func(string, store.Key) error {
	var done atomic.Bool
	return func(o string, k store.Key) error {
		if o == op && k.SK == store.StateSK && done.CompareAndSwap(false, true) {
			return fmt.Errorf("%s %s/%s, written, then: %w", o, k.PK, k.SK, err)
		}
		return nil
	}
}

// A claim whose message never went (its state write committed though the
// caller saw a timeout, and sent nothing) is sent again a third of a lease
// after it was made, by whichever call on the chat runs the scheduler
// then; not before, so a message that is only slow is not doubled at once.
// A message that arrives twice builds its node once.
func TestAClaimWhoseMessageNeverWentIsSentAgainAfterAThirdOfALease(t *testing.T) {
	f := newFixture(t)
	f.table.setLose(answerOnce("create", context.DeadlineExceeded))
	f.log.add(f.chat, "user", long(0))
	n := f.log.add(f.chat, "user", long(1)) + 1
	if err := f.m.Appended(context.Background(), f.ch(), n); err == nil {
		t.Fatal("the append's notice answered no error, though its state write timed out")
	}
	if msgs := f.queue.take(); len(msgs) != 0 || len(f.state(t).Claims) != 2 {
		t.Fatalf("queued %q with %d claims; want nothing queued and both leaves claimed", labels(nodesOf(msgs)), len(f.state(t).Claims))
	}
	view := func() {
		t.Helper()
		if _, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Add(f.m.claimLease/3 - time.Second)
	view()
	if msgs := f.queue.take(); len(msgs) != 0 {
		t.Fatalf("sent %q again before a third of a lease", labels(nodesOf(msgs)))
	}
	f.clock.Add(time.Second)
	view()
	again := f.queue.take()
	if got := labels(nodesOf(again)); got != "0+1, 1+1" {
		t.Fatalf("sent again %q, want both leaves", got)
	}
	f.queue.msgs = append(again, again...) // and the first copies turn up after all
	f.deliverAll(t)
	if st := f.state(t); st.Built != 3 || len(st.Claims) != 0 {
		t.Errorf("%d nodes built, %d claims left; want 3 built, none left", st.Built, len(st.Claims))
	}
	for _, label := range []string{"0+1", "1+1", "0+2"} {
		if calls := f.comp.callsOf(label); calls > 1 {
			t.Errorf("node %s: %d compactor calls, want at most one", label, calls)
		}
	}
}
