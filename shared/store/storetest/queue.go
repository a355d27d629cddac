package storetest

import (
	"context"
	"fmt"
	"slices"
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
