package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// Queue timings are whole seconds: SQS counts delays and visibility in
// seconds. The subtests run in parallel, so the suite takes about as long as
// its slowest subtest.
const (
	second    = time.Second
	longWait  = 5 * time.Second  // one long poll
	patience  = 15 * time.Second // how long a due message may take to show up
	hideLong  = 30 * time.Second // visibility that outlasts the subtest
	batchSize = 10               // SQS's maximum per receive
)

// TestQueue checks the store.Queue and store.Receiver contract.
func TestQueue(t *testing.T, newQueue func(t *testing.T) (store.Queue, store.Receiver)) {
	t.Run("SendReceiveAck", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		must(t, q.Send(ctx, `{"job":"hello"}`, 0))
		d := receiveOne(ctx, t, r, second)
		if d.Body != `{"job":"hello"}` || d.Receives != 1 || d.ID == "" || d.Receipt == "" {
			t.Fatalf("first delivery = %+v, want the body sent, Receives 1, an id and a receipt", d)
		}
		must(t, r.Ack(ctx, d.Receipt))
		// Unacked, it would be back after its 1 s visibility.
		expectNothing(ctx, t, r, 3*second, "after Ack")
	})

	t.Run("DelayHidesMessageUntilItPasses", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		must(t, q.Send(ctx, "later", 2*second))
		expectNothing(ctx, t, r, 1*second, "during the 2 s delay")
		d := receiveOne(ctx, t, r, hideLong)
		if d.Body != "later" || d.Receives != 1 {
			t.Fatalf("after the delay: %+v, want body %q, Receives 1", d, "later")
		}
		must(t, r.Ack(ctx, d.Receipt))
	})

	t.Run("RedeliveryAfterMissingAck", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		must(t, q.Send(ctx, "again", 0))
		first := receiveOne(ctx, t, r, 2*second)
		expectNothing(ctx, t, r, 1*second, "while the first delivery is hidden")
		prev := first
		for range 2 { // not acked: it comes back, counting receives
			d := receiveOne(ctx, t, r, 1*second)
			if d.ID != first.ID || d.Body != "again" {
				t.Fatalf("redelivery = %+v, want message %s again", d, first.ID)
			}
			if d.Receives <= prev.Receives {
				t.Fatalf("Receives went from %d to %d, want it to count up", prev.Receives, d.Receives)
			}
			if d.Receipt == prev.Receipt {
				t.Fatalf("redelivery reused receipt %q; each delivery gets its own", d.Receipt)
			}
			prev = d
		}
		must(t, r.Ack(ctx, prev.Receipt))
	})

	t.Run("RetryBringsMessageBackAfterDelay", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		must(t, q.Send(ctx, "retry me", 0))
		first := receiveOne(ctx, t, r, hideLong)
		must(t, r.Retry(ctx, first.Receipt, 2*second))
		expectNothing(ctx, t, r, 1*second, "during the 2 s retry delay")
		again := receiveOne(ctx, t, r, hideLong)
		if again.ID != first.ID || again.Body != "retry me" || again.Receives <= first.Receives {
			t.Fatalf("after Retry: %+v, want message %s with Receives over %d", again, first.ID, first.Receives)
		}
		// A zero delay hands it straight back, long before its 30 s visibility.
		must(t, r.Retry(ctx, again.Receipt, 0))
		third := receiveOne(ctx, t, r, hideLong)
		if third.ID != first.ID {
			t.Fatalf("after Retry(0): %+v, want message %s", third, first.ID)
		}
		must(t, r.Ack(ctx, third.Receipt))
	})

	t.Run("ReceiveHonoursMaxAndDeliversEachOnce", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		const n = 5
		var want []string
		for i := range n {
			body := fmt.Sprintf("m%d", i)
			want = append(want, body)
			must(t, q.Send(ctx, body, 0))
		}
		var got []string
		ids := map[string]bool{}
		deadline := time.Now().Add(patience)
		for len(got) < n && time.Now().Before(deadline) {
			ds, err := r.Receive(ctx, 2, hideLong, longWait)
			must(t, err)
			if len(ds) > 2 {
				t.Fatalf("Receive(max 2) returned %d messages", len(ds))
			}
			for _, d := range ds {
				if ids[d.ID] {
					t.Fatalf("message %s (%q) delivered twice while hidden", d.ID, d.Body)
				}
				ids[d.ID] = true
				got = append(got, d.Body)
				must(t, r.Ack(ctx, d.Receipt))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("received %q, want each of %q once", got, want)
		}
	})

	t.Run("SendBatchDeliversEachBodyOnce", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		var want []string
		for i := range store.MaxSendBatch {
			want = append(want, fmt.Sprintf(`{"n":%d}`, i))
		}
		must(t, q.SendBatch(ctx, want, 0))
		got := receiveAll(ctx, t, r, len(want))
		if !slices.Equal(got, want) {
			t.Fatalf("received %q, want each of %q once", got, want)
		}
	})

	t.Run("SendBatchDelayHidesEveryBody", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		must(t, q.SendBatch(ctx, []string{"a", "b"}, 2*second))
		expectNothing(ctx, t, r, 1*second, "during the batch's 2 s delay")
		if got := receiveAll(ctx, t, r, 2); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after the delay: %q, want [a b]", got)
		}
	})

	t.Run("SendBatchRefusesNoneAndTooMany", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		for _, n := range []int{0, store.MaxSendBatch + 1} {
			bodies := make([]string, n)
			for i := range bodies {
				bodies[i] = "x"
			}
			err := q.SendBatch(ctx, bodies, 0)
			var be *store.BatchError
			if err == nil || errors.As(err, &be) {
				t.Fatalf("SendBatch of %d bodies: %v, want a plain error (nothing sent)", n, err)
			}
		}
		expectNothing(ctx, t, r, 1*second, "after refused batches")
	})

	t.Run("SendBatchNamesTheBodyTooLargeAndSendsTheRest", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q, r := newQueue(t)
		big := strings.Repeat("x", maxBody+1)
		// Two bodies near the limit also pass the batch's payload limit
		// together: they still both arrive.
		near := strings.Repeat("n", maxBody-10)
		err := q.SendBatch(ctx, []string{"first", big, near, near + "2"}, 0)
		var be *store.BatchError
		if !errors.As(err, &be) || !slices.Equal(be.Failed, []int{1}) || !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("SendBatch with body 1 too large: %v, want a *store.BatchError naming [1] with store.ErrTooLarge", err)
		}
		got := receiveAll(ctx, t, r, 3)
		if want := []string{"first", near, near + "2"}; !slices.Equal(got, want) {
			t.Fatalf("received %d bodies, want the 3 that fit", len(got))
		}
	})
}

// maxBody is SQS's message size limit, which every adapter keeps.
const maxBody = 256 << 10

// receiveAll receives (and acks) n messages within patience, failing on a
// duplicate, and returns their bodies sorted.
func receiveAll(ctx context.Context, t *testing.T, r store.Receiver, n int) []string {
	t.Helper()
	var got []string
	ids := map[string]bool{}
	deadline := time.Now().Add(patience)
	for len(got) < n && time.Now().Before(deadline) {
		ds, err := r.Receive(ctx, batchSize, hideLong, longWait)
		must(t, err)
		for _, d := range ds {
			if ids[d.ID] {
				t.Fatalf("message %s delivered twice while hidden", d.ID)
			}
			ids[d.ID] = true
			got = append(got, d.Body)
			must(t, r.Ack(ctx, d.Receipt))
		}
	}
	if len(got) != n {
		t.Fatalf("received %d messages within %s, want %d", len(got), patience, n)
	}
	slices.Sort(got)
	return got
}

// receiveOne waits (up to patience) for exactly one message and hides it
// for visibility.
func receiveOne(ctx context.Context, t *testing.T, r store.Receiver, visibility time.Duration) store.Delivery {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		ds, err := r.Receive(ctx, batchSize, visibility, longWait)
		must(t, err)
		switch len(ds) {
		case 0:
			continue
		case 1:
			return ds[0]
		default:
			t.Fatalf("received %d messages, want 1: %+v", len(ds), ds)
		}
	}
	t.Fatalf("no message within %s", patience)
	return store.Delivery{}
}

// expectNothing long-polls for wait and fails on any delivery.
func expectNothing(ctx context.Context, t *testing.T, r store.Receiver, wait time.Duration, when string) {
	t.Helper()
	ds, err := r.Receive(ctx, batchSize, hideLong, wait)
	must(t, err)
	if len(ds) != 0 {
		t.Fatalf("%s: received %+v, want nothing", when, ds)
	}
}
