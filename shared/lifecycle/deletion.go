// A chat's deletion: marked in its state, run in steps, finished by
// removing its index item and retiring its incarnation.

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// Delete deletes the chat: it marks it deleting in the index (appends are
// refused from then on), removes the items of its current incarnation in
// steps of StepItems, releases the images it named, its texts, then its
// identity item and its index item last. One call runs at most steps
// steps (Config.Steps when 0) and returns what is left to the next
// call; any call resumes where the last stopped, so a crash midway loses
// nothing. Deleting a chat that does not exist is done at once.
func (c *Chats) Delete(ctx context.Context, tenant, chat string, steps int) (Progress, error) {
	_, p, _, err := c.deleteIf(ctx, tenant, chat, steps, nil)
	return p, err
}

// deleteIf is Delete when claim, given the chat's state as it stands in
// the write that marks it deleting, allows it (nil: always); otherwise it
// does nothing and reports claimed false. A deletion already under way is
// resumed whatever claim says. It returns the incarnation it deletes,
// which the messages continuing it name.
func (c *Chats) deleteIf(ctx context.Context, tenant, chat string, steps int, claim func(chatState) bool) (ch chatid.Chat, p Progress, claimed bool, err error) {
	ch, e, claimed, _, err := c.markDeleting(ctx, tenant, chat, claim)
	if err != nil || !claimed {
		return chatid.Chat{}, Progress{}, claimed, err
	}
	p, err = c.run(ctx, ch, steps, e)
	return ch, p, true, err
}

// markDeleting marks the chat deleting when claim (nil: always) allows it
// of the chat's state in the same write, and returns the incarnation to
// delete and its state. claimed: the chat is being deleted, marked now
// (fresh) or before (a deletion under way, or an id with nothing
// recorded, which has nothing to mark).
func (c *Chats) markDeleting(ctx context.Context, tenant, chat string, claim func(chatState) bool) (ch chatid.Chat, e chatState, claimed, fresh bool, err error) {
	now := c.now().UnixMilli()
	r, err := c.update(ctx, tenant, chat, func(r *chatRecord) error {
		fresh = false
		if r.state.Deleting != 0 {
			if r.legacy {
				return nil // moved to the identity item, as it is
			}
			return errNoChange
		}
		if claim != nil && !claim(r.state) {
			return errNotClaimed
		}
		if !r.id.Recorded && !r.listed {
			return errNoChange // no chat: nothing to delete, nothing to mark
		}
		r.state.Deleting, fresh = now, true
		return nil
	})
	if errors.Is(err, errNotClaimed) {
		return chatid.Chat{}, chatState{}, false, false, nil
	}
	if err != nil {
		return chatid.Chat{}, chatState{}, false, false, err
	}
	if r.state.Deleting == 0 {
		// Nothing of the chat is recorded: what its id may still hold (rows
		// of a chat listed nowhere) goes as a deletion's would.
		r.state.Deleting = now
	}
	// The mark and the incarnation are one item: no append opens another
	// from here on.
	return r.id.Chat, r.state, true, fresh, nil
}

// errNotClaimed: a conditional deletion found its condition false.
var errNotClaimed = errors.New("not claimed")

// run runs up to steps steps (Config.Steps when 0) of the deletion of
// the incarnation ch, from the progress its chat's state e recorded.
func (c *Chats) run(ctx context.Context, ch chatid.Chat, steps int, e chatState) (Progress, error) {
	if steps <= 0 {
		steps = c.steps
	}
	p := Progress{Removed: e.Removed, Images: e.Images}
	more, err := c.sweep(ctx, ch, steps, &p)
	if err == nil && !more {
		if err := c.finish(ctx, ch); err != nil {
			return p, err
		}
		p.Done = true
		return p, nil
	}
	c.record(ctx, ch.Tenant, ch.ID, p)
	return p, err
}

// sweep runs up to steps steps (stepAll) of removing the items of the
// incarnation ch, within CallBudget, adding what they removed to p. more:
// items are left (or the last step failed).
func (c *Chats) sweep(ctx context.Context, ch chatid.Chat, steps int, p *Progress) (more bool, err error) {
	start := time.Now()
	for step := 0; step < steps && time.Since(start) < CallBudget; step++ {
		removed, images, more, err := c.stepAll(ctx, ch)
		p.Removed += removed
		p.Images += images
		if err != nil || !more {
			return more, err
		}
	}
	return true, nil
}

// stepAll removes one step's items of the incarnation ch and, once it is empty,
// of what a chat written before incarnations left in the id's home
// partition and texts (the same chat, before its first append since), so
// no deletion leaves those behind.
func (c *Chats) stepAll(ctx context.Context, ch chatid.Chat) (removed, images int64, more bool, err error) {
	removed, images, more, err = c.step(ctx, ch)
	if err != nil || more || ch.Inc == "" {
		return removed, images, more, err
	}
	return c.step(ctx, chatid.Chat{Tenant: ch.Tenant, ID: ch.ID})
}

// step removes up to StepItems items of the incarnation ch: its items other than its
// image references first, then the references (each image released before
// its reference item goes), then its texts. It reports whether anything
// is left. The identity item (in the partition of a chat written before
// incarnations) is left to finish.
func (c *Chats) step(ctx context.Context, ch chatid.Chat) (removed, images int64, more bool, err error) {
	own, named, err := c.stepItems(ctx, ch)
	if err != nil {
		return 0, 0, false, err
	}
	switch {
	case len(own) > 0:
		own = own[:min(len(own), StepItems)]
		err := inParallel(ctx, own, func(ctx context.Context, it store.Item) error {
			if strings.HasPrefix(it.SK, store.ErasurePrefix) {
				// An erasure's pending images go with it (dropErasure).
				if err := c.dropErasure(ctx, ch, it); err != nil {
					return err
				}
			}
			if err := c.table.Delete(ctx, it.Key, 0); err != nil {
				return fmt.Errorf("lifecycle: deleting %s of chat %s: %w", it.SK, ch.ID, err)
			}
			return nil
		})
		if err != nil {
			// Some of the step's items may be gone; the next call counts what is left.
			return 0, 0, true, err
		}
		return int64(len(own)), 0, true, nil
	case len(named) == 0:
		removed, err := c.removeTexts(ctx, ch)
		if err != nil {
			return 0, 0, true, err
		}
		return removed, 0, removed > 0, nil
	}
	removed, images, err = c.removeReferences(ctx, ch, named[:min(len(named), StepItems)])
	return removed, images, true, err
}

// stepItems reads a page of the incarnation's items: its own (neither
// image references nor the identity item) and its image references.
// When a page holds only references, the items past them are read too.
func (c *Chats) stepItems(ctx context.Context, ch chatid.Chat) (own, named []store.Item, err error) {
	pk := ch.PK()
	page, err := c.table.Query(ctx, store.Query{PK: pk, Limit: StepItems + 1})
	if err != nil {
		return nil, nil, fmt.Errorf("lifecycle: reading chat %s: %w", ch.ID, err)
	}
	for _, it := range page.Items {
		switch {
		case strings.HasPrefix(it.SK, store.ChatImagePrefix):
			named = append(named, it)
		case it.SK != store.IdentitySK:
			own = append(own, it)
		}
	}
	if len(own) > 0 || page.Next == "" {
		return own, named, nil
	}
	rest, err := c.table.Query(ctx, store.Query{PK: pk, After: store.ChatImagePrefix + "\xff", Limit: StepItems + 1})
	if err != nil {
		return nil, nil, fmt.Errorf("lifecycle: reading chat %s: %w", ch.ID, err)
	}
	for _, it := range rest.Items {
		if it.SK != store.IdentitySK {
			own = append(own, it)
		}
	}
	return own, named, nil
}

// removeTexts deletes up to StepItems of the incarnation's texts too big
// for their rows, last: kept under the chat, so none is another chat's.
// (Listed rather than read from the rows: an append's record expires
// after 7 days, and a text an append stored before failing is named by
// nothing.) It returns how many it deleted; none means none is left.
func (c *Chats) removeTexts(ctx context.Context, ch chatid.Chat) (removed int64, err error) {
	keys, err := c.blobs.List(ctx, ch.TextPrefix(), "", StepItems)
	if err != nil {
		return 0, fmt.Errorf("lifecycle: listing the texts of chat %s: %w", ch.ID, err)
	}
	err = inParallel(ctx, keys, func(ctx context.Context, key string) error {
		if err := c.blobs.Delete(ctx, key); err != nil {
			return fmt.Errorf("lifecycle: deleting text %s of chat %s: %w", key, ch.ID, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int64(len(keys)), nil
}

// removeReferences releases the image of each reference item, then
// deletes the item, and counts the items removed and the images gone.
func (c *Chats) removeReferences(ctx context.Context, ch chatid.Chat, named []store.Item) (removed, images int64, err error) {
	for _, it := range named {
		name := strings.TrimPrefix(it.SK, store.ChatImagePrefix)
		gone, err := c.releaseImage(ctx, ch, name)
		if err != nil {
			return removed, images, err
		}
		if gone {
			images++
		}
		if err := c.table.Delete(ctx, it.Key, 0); err != nil {
			return removed, images, fmt.Errorf("lifecycle: deleting %s of chat %s: %w", it.SK, ch.ID, err)
		}
		removed++
	}
	return removed, images, nil
}

// inParallel calls fn for each item, concurrency at a time, and
// returns the first error.
func inParallel[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, it := range items {
		g.Go(func() error { return fn(gctx, it) })
	}
	return g.Wait()
}

// finish removes the index item, queues the sweep after the deletion,
// retires the incarnation and scrubs the store: the chat is gone, and the
// next append to its id opens a new incarnation. In this order: until the
// identity item goes, appends find the chat being deleted, so none lists
// a new chat that this removal then unlists; no incarnation is retired
// without its sweep queued (a retried finish queues another, which is
// harmless); and the scrub comes after the last removal, so no byte of the
// chat is left in the store's file when the deletion answers done (a
// failed scrub fails the call, and the next call, finding the chat gone,
// scrubs again).
func (c *Chats) finish(ctx context.Context, ch chatid.Chat) error {
	if err := c.table.Delete(ctx, indexKey(ch.Tenant, ch.ID), 0); err != nil {
		return fmt.Errorf("lifecycle: removing chat %s from the index: %w", ch.ID, err)
	}
	if c.queue != nil {
		if err := c.queue.Send(ctx, tasks.For(tasks.Settle, ch).Body(), c.settle); err != nil {
			return fmt.Errorf("lifecycle: queueing the sweep after the deletion of chat %s: %w", ch.ID, err)
		}
	}
	if err := c.ids.Retire(ctx, ch); err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	return c.Scrub(ctx)
}

// Scrub clears from the store's file what removed items left there (see
// Config.Scrubber): whatever removes a tenant's data calls it last, before
// it answers done.
func (c *Chats) Scrub(ctx context.Context) error {
	if c.scrub == nil {
		return nil
	}
	if err := c.scrub.Scrub(ctx); err != nil {
		return fmt.Errorf("lifecycle: scrubbing the store: %w", err)
	}
	return nil
}

// record keeps a deletion's progress in the chat's state, best effort.
func (c *Chats) record(ctx context.Context, tenant, chat string, p Progress) {
	_, _ = c.update(context.WithoutCancel(ctx), tenant, chat, func(r *chatRecord) error {
		if r.state.Deleting == 0 {
			return errNoChange
		}
		r.state.Removed, r.state.Images = p.Removed, p.Images
		return nil
	})
}

// Deletion is memory.Deletions: the progress of the chat's deletion, or
// nil when it is not being deleted.
func (c *Chats) Deletion(ctx context.Context, tenant, chat string) (*wire.StatusDeletion, error) {
	r, err := c.load(ctx, tenant, chat)
	if err != nil || r.state.Deleting == 0 {
		return nil, err
	}
	return &wire.StatusDeletion{Removed: r.state.Removed, Images: r.state.Images}, nil
}
