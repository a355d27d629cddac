package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// loadBackend is a backend and a way to load many items at once beneath
// its table's contract: one bbolt transaction, or DynamoDB's
// BatchWriteItem.
type loadBackend struct {
	testenv.Backend
	load func(t *testing.T, items []store.Item)
}

func loadBackends(t *testing.T) []loadBackend {
	emb := testenv.Embedded(t)
	out := []loadBackend{{Backend: emb, load: func(t *testing.T, items []store.Item) {
		if err := emb.Table.(*embedded.Table).CreateAll(t.Context(), items); err != nil {
			t.Fatal(err)
		}
	}}}
	b, d, table, ok := onDynalite(t)
	if !ok {
		return out
	}
	out = append(out, loadBackend{Backend: b, load: func(t *testing.T, items []store.Item) {
		for start := 0; start < len(items); start += 25 {
			var reqs []types.WriteRequest
			for _, it := range items[start:min(start+25, len(items))] {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
					store.AttrPK:      &types.AttributeValueMemberS{Value: it.PK},
					store.AttrSK:      &types.AttributeValueMemberS{Value: it.SK},
					store.AttrVersion: &types.AttributeValueMemberN{Value: "1"},
					store.AttrBody:    &types.AttributeValueMemberB{Value: it.Body},
				}}})
			}
			for len(reqs) > 0 {
				res, err := d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
				if err != nil {
					t.Fatal(err)
				}
				reqs = res.UnprocessedItems[table]
			}
		}
	}})
	return out
}

// seeded is a chat written straight into the stores, as the code lays it
// out: its index item and its identity item with its last activity.
type seeded struct {
	chat     string
	activity time.Time
	own      *int // its own retention
}

func seedItems(t *testing.T, tenant string, chats []seeded) []store.Item {
	t.Helper()
	items := make([]store.Item, 0, 2*len(chats))
	for i, c := range chats {
		idx := []byte("{}")
		if c.own != nil {
			idx = fmt.Appendf(nil, `{"rd":%d}`, *c.own)
		}
		id := fmt.Appendf(nil, `{"n":"%016x","s":{"a":%d}}`, i+1, c.activity.UnixMilli())
		items = append(items,
			store.Item{Key: store.Key{PK: store.IndexPK(tenant), SK: store.IndexChatSK(c.chat)}, Body: idx},
			store.Item{Key: chatid.Home(tenant, c.chat), Body: id})
	}
	return items
}

// callCount counts the table calls, and the items the chat index pages
// answered.
type callCount struct {
	calls, indexItems atomic.Int64
}

func (n *callCount) wrap(t store.Table) store.Table {
	call := func(store.Key) error { n.calls.Add(1); return nil }
	return &countingTable{FailingTable: testenv.FailingTable{Table: t, FailGet: call, FailCreate: call, FailUpdate: call, FailDelete: call,
		FailQuery:    func(store.Query) error { n.calls.Add(1); return nil },
		FailBatchGet: func([]store.Key) error { n.calls.Add(1); return nil }}, n: n}
}

type countingTable struct {
	testenv.FailingTable
	n *callCount
}

func (c *countingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	p, err := c.FailingTable.Query(ctx, q)
	if strings.HasPrefix(q.PK, "chats/") && q.Prefix == store.IndexChatPrefix {
		c.n.indexItems.Add(int64(len(p.Items)))
	}
	return p, err
}

// A sweep of a large tenant runs in steps of bounded work, deletes each
// chat idle past its retention exactly once (its own or the tenant's),
// and none other. 5,000 chats are 50 steps, five times each kind of chat
// the rule names (a step's work is bounded by its page of 100, so more
// chats add steps, not work a step); make test-long sweeps the 100,000 of
// docs/scale.md.
func TestASweepOfALargeTenantDeletesEachExpiredChatOnceInBoundedSteps(t *testing.T) {
	t.Parallel()
	n := 5_000
	switch {
	case testenv.Long():
		n = 100_000
	case testing.Short():
		n = 2_000
	}
	for _, b := range loadBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Now()
			days := func(d int) time.Time { return now.Add(-time.Duration(d) * 24 * time.Hour) }
			forever, long, two := 0, 90, 2
			var chats []seeded
			expired := map[string]bool{}
			for i := range n {
				c := seeded{chat: fmt.Sprintf("c%06d", i), activity: days(1)}
				switch {
				case i%100 == 7: // idle past the tenant's 30 days
					c.activity = days(40)
					expired[c.chat] = true
				case i%1000 == 3: // as idle, but kept forever
					c.activity, c.own = days(40), &forever
				case i%1000 == 5: // as idle, within its own 90 days
					c.activity, c.own = days(40), &long
				case i%1000 == 9: // its own 2 days, idle 3
					c.activity, c.own = days(3), &two
					expired[c.chat] = true
				}
				chats = append(chats, c)
			}
			start := time.Now()
			b.load(t, seedItems(t, "big", chats))
			// Another tenant's chats: one expired, one not.
			b.load(t, seedItems(t, "small", []seeded{{chat: "old", activity: days(40)}, {chat: "new", activity: days(1)}}))
			expired["small/old"] = true

			loaded := time.Since(start)
			var count callCount
			b.Table = count.wrap(b.Table)
			chats0 := lifecycle.New(lifecycle.Config{Table: b.Table, Blobs: b.Blobs, Queue: b.Queue, Now: func() time.Time { return now }})
			for _, tenant := range []string{"big", "small"} {
				if err := chats0.SetTenantRetention(ctx, tenant, 30); err != nil {
					t.Fatal(err)
				}
			}

			var steps, claimed, maxCalls, maxItems int64
			step := func(run func() (lifecycle.SweepStep, error)) lifecycle.SweepStep {
				t.Helper()
				c0, i0 := count.calls.Load(), count.indexItems.Load()
				s, err := run()
				if err != nil {
					t.Fatal(err)
				}
				if s.Ran {
					steps++
					claimed += int64(s.Expired)
					maxCalls = max(maxCalls, count.calls.Load()-c0)
					maxItems = max(maxItems, count.indexItems.Load()-i0)
				}
				return s
			}
			start = time.Now()
			s := step(func() (lifecycle.SweepStep, error) { return chats0.StartSweep(ctx) })
			for !s.Done {
				if !s.Ran {
					t.Fatalf("step %d of run %s did not run", s.Seq, s.Run)
				}
				if s.Seq == 3 {
					// The hourly trigger finds the sweep running.
					if again := step(func() (lifecycle.SweepStep, error) { return chats0.StartSweep(ctx) }); again.Ran || again.Run != s.Run {
						t.Fatalf("a trigger during run %s = %+v, want nothing run", s.Run, again)
					}
				}
				s = step(func() (lifecycle.SweepStep, error) { return chats0.SweepStep(ctx, s.Run, s.Seq+1) })
			}
			swept := time.Since(start)
			t.Logf("%d chats: %d steps, at most %d index items and %d table calls a step (claims included); %d claimed", n+2, steps, maxItems, maxCalls, claimed)
			if maxItems > lifecycle.SweepChats {
				t.Errorf("a step read %d index items, over %d", maxItems, lifecycle.SweepChats)
			}
			// A page, its batch of identities, each claim's read and write,
			// the queue's batches: bounded by the page, not the tenant.
			if limit := int64(20 + 4*lifecycle.SweepChats); maxCalls > limit {
				t.Errorf("a step made %d table calls, over %d", maxCalls, limit)
			}
			if min := int64((n + 2) / lifecycle.SweepChats); steps < min {
				t.Errorf("%d steps for %d chats, want at least %d", steps, n+2, min)
			}
			if claimed != int64(len(expired)) {
				t.Errorf("claimed %d deletions, want the %d expired chats once each", claimed, len(expired))
			}

			// The deletions the sweep queued run; a second sweep finds
			// nothing more to claim.
			start = time.Now()
			drainTasks(t, b.Backend, chats0)
			deleted := time.Since(start)
			start = time.Now()
			if again, err := chats0.ExpireAll(ctx); err != nil || again != 0 {
				t.Fatalf("a second sweep claimed %d, %v", again, err)
			}
			t.Logf("seeded in %s, swept in %s, the %d deletions ran in %s, a second sweep (nothing to claim) took %s",
				loaded.Round(time.Millisecond), swept.Round(time.Millisecond), claimed, deleted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			left := map[string]bool{}
			for _, tenant := range []string{"big", "small"} {
				for after := ""; ; {
					p, err := b.Table.Query(ctx, store.Query{PK: store.IndexPK(tenant), Prefix: store.IndexChatPrefix, After: after, Limit: 1000})
					if err != nil {
						t.Fatal(err)
					}
					for _, it := range p.Items {
						name := strings.TrimPrefix(it.SK, store.IndexChatPrefix)
						if tenant == "small" {
							name = "small/" + name
						}
						left[name] = true
					}
					if after = p.Next; after == "" {
						break
					}
				}
			}
			for _, c := range append(chats, seeded{chat: "small/old"}, seeded{chat: "small/new"}) {
				if left[c.chat] == expired[c.chat] {
					t.Errorf("chat %s: listed %v, expired %v", c.chat, left[c.chat], expired[c.chat])
				}
			}
			for chat := range expired {
				tenant, id := "big", chat
				if rest, ok := strings.CutPrefix(chat, "small/"); ok {
					tenant, id = "small", rest
				}
				if _, err := b.Table.Get(ctx, chatid.Home(tenant, id)); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("expired chat %s kept its identity item: %v", chat, err)
					break
				}
			}
		})
	}
}

// drainTasks runs the lifecycle's queue messages until the queue is empty.
func drainTasks(t *testing.T, b testenv.Backend, chats *lifecycle.Chats) {
	t.Helper()
	ctx := t.Context()
	for {
		ds, err := b.Receiver.Receive(ctx, 10, time.Minute, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
		for _, d := range ds {
			if _, err := lifecycleTasks(chats).Route(ctx, d.Body); err != nil {
				t.Fatalf("Route(%s): %v", d.Body, err)
			}
			if err := b.Receiver.Ack(ctx, d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A sweep's steps run once each whatever the queue delivers: a copy of a
// step's message, or a message of another run, does nothing; a step that
// fails gives its step back to the message's redelivery; a run whose next
// message was lost is resumed from its cursor by the first trigger after
// its lease, and a trigger within it starts nothing.
func TestASweepsStepsRunOnceEachWhateverTheQueueDelivers(t *testing.T) {
	t.Parallel()
	for _, b := range loadBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			now := func() time.Time { return time.UnixMilli(clock.Load()) }
			var chats []seeded
			for i := range 450 {
				chats = append(chats, seeded{chat: fmt.Sprintf("c%04d", i), activity: now().Add(-40 * 24 * time.Hour)})
			}
			b.load(t, seedItems(t, "t", chats))
			var failBatch atomic.Bool
			b.Table = &testenv.FailingTable{Table: b.Table, FailBatchGet: func([]store.Key) error {
				if failBatch.CompareAndSwap(true, false) {
					return store.Unavailable("test", errors.New("the table is down"))
				}
				return nil
			}}
			c := lifecycle.New(lifecycle.Config{Table: b.Table, Blobs: b.Blobs, Queue: b.Queue, Now: now})
			if err := c.SetTenantRetention(ctx, "t", 30); err != nil {
				t.Fatal(err)
			}
			first, err := c.StartSweep(ctx)
			if err != nil || !first.Ran || first.Expired != lifecycle.SweepChats {
				t.Fatalf("first step = %+v, %v", first, err)
			}
			total := first.Expired
			// Its message delivered twice: run once.
			s1, err := c.SweepStep(ctx, first.Run, 1)
			if err != nil || !s1.Ran {
				t.Fatalf("step 1 = %+v, %v", s1, err)
			}
			total += s1.Expired
			if dup, err := c.SweepStep(ctx, first.Run, 1); err != nil || dup.Ran {
				t.Fatalf("step 1 again = %+v, %v, want nothing run", dup, err)
			}
			if other, err := c.SweepStep(ctx, "0000000000000000", 2); err != nil || other.Ran {
				t.Fatalf("a step of another run = %+v, %v", other, err)
			}
			// A step that fails is run again by its redelivery.
			failBatch.Store(true)
			if _, err := c.SweepStep(ctx, first.Run, 2); err == nil {
				t.Fatal("a step over a failing table succeeded")
			}
			s2, err := c.SweepStep(ctx, first.Run, 2)
			if err != nil || !s2.Ran || s2.Expired != lifecycle.SweepChats {
				t.Fatalf("step 2 redelivered = %+v, %v", s2, err)
			}
			total += s2.Expired
			// Step 3's message is lost. A trigger within the lease starts
			// nothing; one after it resumes the cursor.
			clock.Add(time.Minute.Milliseconds())
			if s, err := c.StartSweep(ctx); err != nil || s.Ran {
				t.Fatalf("a trigger during the run = %+v, %v", s, err)
			}
			clock.Add(lifecycle.SweepLease.Milliseconds())
			s, err := c.StartSweep(ctx)
			if err != nil || !s.Ran || s.Run == first.Run {
				t.Fatalf("a trigger after the lease = %+v, %v, want a new run resuming", s, err)
			}
			total += s.Expired
			for !s.Done {
				if s, err = c.SweepStep(ctx, s.Run, s.Seq+1); err != nil || !s.Ran {
					t.Fatalf("step = %+v, %v", s, err)
				}
				total += s.Expired
			}
			if total != len(chats) {
				t.Fatalf("claimed %d deletions, want %d", total, len(chats))
			}
			drainTasks(t, b.Backend, c)
			if p, err := b.Table.Query(ctx, store.Query{PK: store.IndexPK("t"), Prefix: store.IndexChatPrefix}); err != nil || len(p.Items) != 0 {
				t.Fatalf("left listed: %d, %v", len(p.Items), err)
			}
			// The next hour's trigger sweeps anew and finds nothing.
			clock.Add(time.Hour.Milliseconds())
			var body []byte
			body, _ = json.Marshal(map[string]string{"kind": "expire"})
			if _, err := lifecycleTasks(c).Route(ctx, string(body)); err != nil {
				t.Fatalf("the trigger = %v", err)
			}
			drainTasks(t, b.Backend, c)
		})
	}
}
