package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// A retention sweep walks the tenants that set a retention (RetentionPK)
// and, in each, its chat index a page at a time, claiming the deletion of
// each chat idle past its retention. It is one run of bounded steps: each
// step reads at most SweepChats index items (and the identity items of
// those chats, in one batch) across at most sweepTenants tenants, claims
// the deletions it finds due and queues them, then moves the run's cursor
// on and hands the rest to a message naming the next step. The run's item
// (store.SweepKey) holds the cursor and a lease:
//
//   - an hourly trigger ({"kind":"expire"}) starts a run only when no run
//     holds the lease (its last step ended less than SweepLease ago), so
//     sweeps never pile up; a run whose lease lapsed (its next message was
//     lost) is resumed from its cursor by the next trigger;
//   - a step message names its run and its step number; one that names
//     another run or step (a copy delivered twice, a message of a run
//     since replaced) does nothing, and a step is taken by a conditional
//     write, so two copies of one message run it once;
//   - a step that fails gives its step back, so the message's redelivery
//     runs it again from the same cursor; claims are conditional writes of
//     each chat's state, so a chat claimed before is not claimed again. A
//     step cut off before it could (a timeout) holds its step for
//     stepLease: its message, asked again meanwhile, waits that out and
//     runs it;
//   - a run whose next message is not sent (the queue refused it after
//     the step was recorded) stops; the first trigger after its lease
//     resumes it from its cursor.

// Sweep tunables.
const (
	// SweepChats bounds the chat index items one sweep step reads.
	SweepChats = 100
	// sweepTenants bounds the tenants one step moves through, so tenants
	// with few chats cost a bounded step too.
	sweepTenants = 10
	// SweepLease is how long a run holds off a new one after its last
	// step: well over the time between a step and its next message's
	// delivery.
	SweepLease = 5 * time.Minute
	// stepLease is how long a step that started holds its copies off; one
	// that runs longer has died (a step takes well under CallBudget).
	stepLease = time.Minute
	// sweepTries bounds the optimistic-locking loop on the sweep's item.
	sweepTries = 8
)

// sweepRun is the sweep's item: the run, its cursor and its leases.
type sweepRun struct {
	Run string `json:"r"`
	// Seq is the step the run's next message runs.
	Seq int64 `json:"q"`
	// Tenant is the escaped tenant (RetentionPK's sort key) the cursor is
	// in, After the index sort key to go on after; Passed: Tenant is swept
	// whole (or, with Tenant "", the run has not begun).
	Tenant string `json:"t,omitempty"`
	After  string `json:"c,omitempty"`
	Passed bool   `json:"p,omitempty"`
	// Until is the run's lease, Unix ms.
	Until int64 `json:"u"`
	// Step is when a step of Seq started, Unix ms; 0: none runs.
	Step int64 `json:"s,omitempty"`
	Done bool  `json:"d,omitempty"`
	// Expired counts the deletions the run claimed.
	Expired int64 `json:"n,omitempty"`
}

// SweepStep is what one step of a sweep did.
type SweepStep struct {
	Run string
	// Seq is the step's number in its run.
	Seq int64
	// Ran is false when the step did nothing: a run holds the lease (a
	// trigger), or the message is stale or its step taken by a copy.
	Ran bool
	// Busy: a copy of the message runs the step (or ran it, and died less
	// than stepLease ago); asked again later, the message runs the step
	// once that copy is taken to be dead, or finds it done.
	Busy bool
	// Done: the run is finished.
	Done bool
	// Chats and Tenants count the index items and tenants it read.
	Chats, Tenants int
	// Expired counts the deletions it claimed.
	Expired int
}

func (c *Chats) readSweep(ctx context.Context) (sweepRun, int64, error) {
	it, err := c.table.Get(ctx, store.SweepKey())
	if errors.Is(err, store.ErrNotFound) {
		return sweepRun{}, 0, nil
	}
	if err != nil {
		return sweepRun{}, 0, fmt.Errorf("lifecycle: reading the retention sweep: %w", err)
	}
	var s sweepRun
	if err := json.Unmarshal(it.Body, &s); err != nil {
		return sweepRun{}, 0, fmt.Errorf("lifecycle: the retention sweep's item is corrupt: %w", err)
	}
	return s, it.Version, nil
}

// writeSweep writes s over the item at version (0: none), returning the
// new version; store.ErrConditionFailed when it changed.
func (c *Chats) writeSweep(ctx context.Context, s sweepRun, version int64) (int64, error) {
	body, err := rawjson.Of(s)
	if err != nil {
		return 0, err
	}
	it := store.Item{Key: store.SweepKey(), Body: body, Version: version + 1}
	if version == 0 {
		err = c.table.Create(ctx, it)
	} else {
		err = c.table.Update(ctx, it)
	}
	if err != nil {
		return 0, fmt.Errorf("lifecycle: writing the retention sweep: %w", err)
	}
	return version + 1, nil
}

// StartSweep is the hourly trigger: unless a run holds the lease it
// starts one (resuming the cursor of a run that stopped short) and runs
// its first step.
func (c *Chats) StartSweep(ctx context.Context) (SweepStep, error) {
	for range sweepTries {
		s, v, err := c.readSweep(ctx)
		if err != nil {
			return SweepStep{}, err
		}
		now := c.now().UnixMilli()
		if v != 0 && !s.Done && s.Until > now {
			return SweepStep{Run: s.Run, Seq: s.Seq}, nil // a sweep is running
		}
		next := sweepRun{Run: newRunID(), Passed: true, Until: now + SweepLease.Milliseconds()}
		if v != 0 && !s.Done {
			next.Tenant, next.After, next.Passed, next.Expired = s.Tenant, s.After, s.Passed, s.Expired
		}
		if _, err := c.writeSweep(ctx, next, v); errors.Is(err, store.ErrConditionFailed) {
			continue // another trigger wrote first: read what it did
		} else if err != nil {
			return SweepStep{}, err
		}
		return c.SweepStep(ctx, next.Run, 0)
	}
	return SweepStep{}, store.Unavailable("lifecycle sweep", errors.New("the sweep's item keeps changing"))
}

// SweepStep runs step seq of the run named run, when that is the step the
// run is at and no copy of it runs; the caller sends the next step's
// message when it Ran and is not Done.
func (c *Chats) SweepStep(ctx context.Context, run string, seq int64) (SweepStep, error) {
	out := SweepStep{Run: run, Seq: seq}
	s, v, err := c.readSweep(ctx)
	if err != nil {
		return out, err
	}
	now := c.now().UnixMilli()
	if v == 0 || s.Run != run || s.Seq != seq || s.Done {
		return out, nil
	}
	if s.Step != 0 && now-s.Step < stepLease.Milliseconds() {
		out.Busy = true
		return out, nil
	}
	// Take the step.
	taken := s
	taken.Step, taken.Until = now, now+SweepLease.Milliseconds()
	if v, err = c.writeSweep(ctx, taken, v); errors.Is(err, store.ErrConditionFailed) {
		return out, nil // a copy took it
	} else if err != nil {
		return out, err
	}
	out.Ran = true
	next := taken
	err = c.sweepFrom(ctx, &next, &out)
	if err != nil {
		// Give the step back, cursor as it was, so a redelivery runs it.
		taken.Step = 0
		_, _ = c.writeSweep(context.WithoutCancel(ctx), taken, v)
		return out, err
	}
	next.Seq, next.Step = seq+1, 0
	next.Until = c.now().UnixMilli() + SweepLease.Milliseconds()
	next.Expired += int64(out.Expired)
	if _, err := c.writeSweep(ctx, next, v); err != nil {
		// Its lease was taken over after stepLease: the new holder goes on.
		return out, err
	}
	out.Done = next.Done
	return out, nil
}

// sweepWork is one step's work in progress: the run's cursor it moves
// on, what it counts, the time it judges idleness at, and the deletions it
// claimed, queued once the step has read all it may.
type sweepWork struct {
	c   *Chats
	s   *sweepRun
	out *SweepStep
	now time.Time
	due []chatid.Chat
}

// sweepFrom runs one step's work from the cursor of s, moving it on.
func (c *Chats) sweepFrom(ctx context.Context, s *sweepRun, out *SweepStep) error {
	w := &sweepWork{c: c, s: s, out: out, now: c.now()}
	budget := SweepChats
	def, defOf := 0, ""
	for budget > 0 {
		if s.Passed {
			more, err := w.enterNextTenant(ctx)
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		tenant, err := url.PathUnescape(s.Tenant)
		if err != nil {
			s.Passed = true // not a tenant this code wrote: passed over
			continue
		}
		// A tenant's default retention is read once per step, not once
		// per page of its chats.
		if defOf != tenant {
			if def, err = c.TenantRetention(ctx, tenant); err != nil {
				return err
			}
			defOf = tenant
		}
		read, err := w.sweepPage(ctx, tenant, def, budget)
		if err != nil {
			return err
		}
		budget -= read
	}
	return c.deleteLater(ctx, w.due)
}

// enterNextTenant moves the cursor, whose tenant is passed, to the start
// of the next tenant with a retention. It answers false when the step is
// to stop: it has moved through sweepTenants tenants, or there is no next
// tenant (then the run is done).
func (w *sweepWork) enterNextTenant(ctx context.Context) (bool, error) {
	if w.out.Tenants == sweepTenants {
		return false, nil
	}
	page, err := w.c.table.Query(ctx, store.Query{PK: store.RetentionPK, After: w.s.Tenant, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("lifecycle: reading the tenants with retention: %w", err)
	}
	if len(page.Items) == 0 {
		w.s.Done = true
		return false, nil
	}
	w.s.Tenant, w.s.After, w.s.Passed = page.Items[0].SK, "", false
	w.out.Tenants++
	return true, nil
}

// sweepPage reads the next page (at most limit items) of the chat index
// of tenant, whose default retention is def, from the cursor, claims the
// deletions of the chats on it that are due, and moves the cursor on. It
// answers the number of index items it read.
func (w *sweepWork) sweepPage(ctx context.Context, tenant string, def, limit int) (int, error) {
	page, err := w.c.table.Query(ctx, store.Query{PK: store.IndexPK(tenant), Prefix: store.IndexChatPrefix, After: w.s.After, Limit: limit})
	if err != nil {
		return 0, fmt.Errorf("lifecycle: reading the chats of a tenant: %w", err)
	}
	w.out.Chats += len(page.Items)
	chats, err := w.c.readListed(ctx, tenant, page.Items)
	if err != nil {
		return 0, err
	}
	if err := w.claimDue(ctx, tenant, def, chats); err != nil {
		return 0, err
	}
	if page.Next == "" {
		w.s.Passed = true
	} else {
		w.s.After = page.Next
	}
	return len(page.Items), nil
}

// claimDue claims the deletion of each of the listed chats of tenant that
// is idle past its retention (def when it sets none of its own), or whose
// deletion was left unfinished, adding the incarnations claimed to due.
func (w *sweepWork) claimDue(ctx context.Context, tenant string, def int, chats []listed) error {
	for _, l := range chats {
		idle := idleAt(w.now, l.entry.days(def))
		if l.state.Deleting == 0 && !idle(l.state) {
			continue
		}
		// The page may be old news: idle is asked again of the chat's
		// state as it stands in the write that claims the deletion, so
		// an append since the page was read keeps the chat (or, once
		// the claim is written, is refused). A deletion left
		// unfinished is queued again.
		ch, _, claimed, fresh, err := w.c.markDeleting(ctx, tenant, l.chat, idle)
		if err != nil {
			return err
		}
		if claimed {
			w.due = append(w.due, ch)
		}
		if fresh {
			w.out.Expired++
		}
	}
	return nil
}

// deleteLater hands the deletions of the incarnations chs to the queue, a
// batch at a time; with no queue it runs each to its end.
func (c *Chats) deleteLater(ctx context.Context, chs []chatid.Chat) error {
	if c.queue == nil {
		for _, ch := range chs {
			for p := (Progress{}); !p.Done; {
				var err error
				if p, err = c.continueDeletion(ctx, ch); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for start := 0; start < len(chs); start += store.MaxSendBatch {
		batch := chs[start:min(start+store.MaxSendBatch, len(chs))]
		bodies := make([]string, len(batch))
		for i, ch := range batch {
			bodies[i] = tasks.For(tasks.Delete, ch).Body()
		}
		if err := c.queue.SendBatch(ctx, bodies, 0); err != nil {
			return fmt.Errorf("lifecycle: queueing %d deletions of the sweep: %w", len(bodies), err)
		}
	}
	return nil
}

// ExpireAll runs a whole sweep in the call (the local server's hourly
// one), unless one is running, and returns the deletions it claimed.
func (c *Chats) ExpireAll(ctx context.Context) (int, error) {
	s, err := c.StartSweep(ctx)
	total := s.Expired
	for err == nil && s.Ran && !s.Done {
		s, err = c.SweepStep(ctx, s.Run, s.Seq+1)
		total += s.Expired
	}
	return total, err
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
