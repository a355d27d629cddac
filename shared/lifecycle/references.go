// Image references: which chats name an image, the deletion lease on it,
// and the writers (appends, the hooks, uploads) that record them.

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/store"
)

// refName is how the image's side of a reference names the incarnation
// ch: the chat id and the incarnation, so a late step of a deleted
// incarnation's deletion never removes the reference of the next.
func refName(ch chatid.Chat) string {
	if ch.Inc == "" {
		return ch.ID
	}
	return ch.ID + "~" + ch.Inc
}

// Hold is the image-reference protocol, one order for every writer that
// stores or claims images for a chat (an append or import, after-tool,
// offload-input, an upload target): the writer has prepared its images
// (checked and named, nothing stored) and hands Hold every name it may
// store, claim or name. Hold admits the write as an append is admitted
// (refusing while the chat is being deleted, opening the chat's
// incarnation and recording its activity, see touch), records that the
// incarnation names them, waits out any deletion lease of them, then runs
// store (when not nil), which stores or claims them, and returns the
// incarnation. So deleting the chat (or its retention) deletes them when
// no other chat names them, and deleting another chat keeps them; what
// store stores or finds stays stored while the chat names it. An error of
// store is returned as it is.
//
// A deletion of the chat begun while store ran may have released the
// images before they were there (and deleted nothing): Hold looks at the
// chat once more after store (stillHeld).
//
// An erasure of another message of the chat may release the images while
// store runs: Hold then makes sure they are still named and stored
// (stillNamed).
//
// On the hot path, images the chat names already, it is a read of the
// chat's identity item and one batch read of the chat's references and
// the images' leases, before store; and one more read of the identity
// item and one more batch read of the references and leases after it.
func (c *Chats) Hold(ctx context.Context, tenant, chat string, names []string, store func(context.Context) error) (chatid.Chat, error) {
	// The incarnation and the deletion's mark are one item: a deletion
	// marks the item naming the incarnation it deletes, so it never misses
	// one a writer holds images for.
	names = uniq(slices.Clone(names))
	r, err := c.touch(ctx, tenant, chat)
	if err != nil {
		return chatid.Chat{}, err
	}
	ch := r.id.Chat
	if err := c.hold(ctx, ch, names); err != nil {
		return chatid.Chat{}, err
	}
	if store == nil {
		return ch, nil
	}
	err = store(ctx)
	// Also when store failed midway: what it stored is the chat's.
	live, serr := c.stillHeld(ctx, ch, names)
	if err == nil {
		err = serr
	}
	if err == nil && live {
		err = c.stillNamed(ctx, ch, names)
	}
	if err != nil {
		return chatid.Chat{}, err
	}
	return ch, nil
}

// namedTries bounds stillNamed's repairs: each follows a release of the
// chat's references by an erasure.
const namedTries = 4

// stillNamed makes sure that an erasure of another message of the
// incarnation ch, releasing images while they were stored for it (its
// scan found no live message naming them: the writer's entries are not
// written yet), left them named by the chat and stored. An erasure
// releases an image under its lease, and removes the chat's side of the
// reference before it looks for the messages naming it (releaseErased);
// a writer that finds either side of a reference gone, or the lease live,
// once it has stored the images waits out the lease and writes the
// references again. An image the erasure deleted after it was stored here
// is an outage the writer's retry mends (it stores the image again): the
// writer has logged nothing yet.
//
// A writer that finds its references whole here, before an erasure takes
// the lease, and logs its entries only after that erasure's scan, is not
// seen by it: the erasure deletes no image then, but leaves it pending,
// and settles it SettleAfter later (settleErased), when the writer's
// entries are logged and name it.
func (c *Chats) stillNamed(ctx context.Context, ch chatid.Chat, names []string) error {
	for range namedTries {
		missing, err := c.unnamed(ctx, ch, names)
		if err != nil || len(missing) == 0 {
			return err
		}
		if err := c.awaitLeases(ctx, ch.Tenant, missing); err != nil {
			return err
		}
		if err := c.reference(ctx, ch, missing); err != nil {
			return err
		}
		for _, name := range missing {
			_, err := c.images.Head(ctx, ch.Tenant, name)
			if errors.Is(err, store.ErrNotFound) {
				return store.Unavailable("lifecycle references", fmt.Errorf("image %s was erased while it was stored; send it again", name))
			}
			if err != nil {
				return fmt.Errorf("lifecycle: looking for image %s: %w", name, err)
			}
		}
	}
	return store.Unavailable("lifecycle references", fmt.Errorf("the references of chat %s keep being released", ch.ID))
}

// unnamed returns the names of which the incarnation ch lacks either side
// of its reference, or whose lease is live.
func (c *Chats) unnamed(ctx context.Context, ch chatid.Chat, names []string) ([]string, error) {
	keys := make([]store.Key, 0, 3*len(names))
	for _, name := range names {
		keys = append(keys, store.Key{PK: ch.PK(), SK: store.ChatImageSK(name)},
			store.Key{PK: store.RefPK(ch.Tenant, name), SK: store.RefChatSK(refName(ch))}, lockKey(ch.Tenant, name))
	}
	items, err := c.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: reading the references of chat %s: %w", ch.ID, err)
	}
	found := make(map[store.Key]store.Item, len(items))
	for _, it := range items {
		found[it.Key] = it
	}
	now := c.now().UnixMilli()
	var missing []string
	for k, name := range names {
		_, chatSide := found[keys[3*k]]
		_, imageSide := found[keys[3*k+1]]
		lk, leased := found[keys[3*k+2]]
		if !chatSide || !imageSide || leased && liveLease(lk, now) {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// reference writes both sides of the references of the incarnation ch to
// names, the image's side first; a side there already stays.
func (c *Chats) reference(ctx context.Context, ch chatid.Chat, names []string) error {
	return inParallel(ctx, names, func(ctx context.Context, name string) error {
		for _, k := range []store.Key{{PK: store.RefPK(ch.Tenant, name), SK: store.RefChatSK(refName(ch))}, {PK: ch.PK(), SK: store.ChatImageSK(name)}} {
			if err := c.table.Create(ctx, store.Item{Key: k, Body: []byte("{}")}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return fmt.Errorf("lifecycle: recording image %s: %w", name, err)
			}
		}
		return nil
	})
}

// Uploaded admits the bytes of a direct upload that arrive with no
// request of a chat (a local upload target's PUT): write stores them only
// while a chat of the tenant names the image (POST .../uploads recorded
// it for its chat, Hold), and when none does once they are stored (the
// last such chat was deleted meanwhile) the image is deleted again. So a
// target outlives no chat: once its chat is deleted, and no other chat
// names its image, it is refused (410 expired), and nothing it stored
// stays. An image another chat names is that chat's, kept with it.
func (c *Chats) Uploaded(ctx context.Context, tenant, name string, write func(context.Context) error) error {
	named, err := c.named(ctx, tenant, name)
	if err != nil {
		return err
	}
	if !named {
		return uploadOrphaned(name)
	}
	if err := write(ctx); err != nil {
		return err
	}
	// A deletion that releases the image from here on finds it stored,
	// and deletes it when no chat names it; one that released it before
	// may have found nothing to delete.
	if named, err = c.named(ctx, tenant, name); err != nil || named {
		return err
	}
	if _, err := c.dropUnnamed(ctx, tenant, name, ""); err != nil {
		return err
	}
	return uploadOrphaned(name)
}

// uploadOrphaned refuses an upload whose image no chat names.
func uploadOrphaned(name string) error {
	return &fault.Error{Code: fault.Expired, Message: fmt.Sprintf("the upload of image %s was for a chat that has been deleted, and no other chat names the image; ask a chat for a new target", name)}
}

// stillHeld makes sure that a deletion of the incarnation ch begun while
// images were written for it deletes them. That deletion may have
// released the images before they were there (and deleted nothing, as
// nothing was stored yet): each that no chat names now is deleted
// (dropUnnamed). Those still named stay, for the chats that name them:
// the deletion of ch releases its own reference after this store, so it
// deletes the image when that was the last. It reports whether ch is
// live (and names images).
func (c *Chats) stillHeld(ctx context.Context, ch chatid.Chat, names []string) (bool, error) {
	if len(names) == 0 {
		return false, nil
	}
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil {
		return false, err
	}
	if r.live(ch) {
		return true, nil
	}
	return false, inParallel(ctx, names, func(ctx context.Context, name string) error {
		_, err := c.dropUnnamed(ctx, ch.Tenant, name, refName(ch))
		return err
	})
}

// dropTries bounds dropUnnamed's waits for other deletions' leases.
const dropTries = 4

// dropUnnamed deletes an image stored by a writer after a deletion may
// have released it, when no chat names it, once no other deletion of it
// is in flight (one that checked its references before the image was
// stored again would not delete it). holder is the lease's holder, as
// deleteUnnamed takes it. It reports whether it deleted it.
func (c *Chats) dropUnnamed(ctx context.Context, tenant, name, holder string) (bool, error) {
	for range dropTries {
		if err := c.awaitLeases(ctx, tenant, []string{name}); err != nil {
			return false, err
		}
		if named, err := c.named(ctx, tenant, name); err != nil || named {
			return false, err
		}
		gone, err := c.deleteUnnamed(ctx, tenant, name, holder)
		if !errors.Is(err, errLeased) {
			return gone, err
		}
	}
	return false, store.Unavailable("lifecycle lease", fmt.Errorf("image %s: its lease keeps changing hands", name))
}

// hold records the references of the incarnation ch to names (distinct)
// that it lacks, then waits out the deletion lease of each image it
// referenced just now or found leased.
//
// The image's side of a reference is written first, then the chat's, so
// the chat's side is never there without the image's. (A call cut off
// between the two leaves a reference that keeps the image until the chat
// names it again and is deleted: the safe side.) A lease read in the
// batch is current only for references that were there before it, so a
// reference made here is followed by a fresh read of its lease.
func (c *Chats) hold(ctx context.Context, ch chatid.Chat, names []string) error {
	if len(names) == 0 {
		return nil
	}
	tenant, pk := ch.Tenant, ch.PK()
	keys := make([]store.Key, 0, 2*len(names))
	for _, name := range names {
		keys = append(keys, store.Key{PK: pk, SK: store.ChatImageSK(name)}, lockKey(tenant, name))
	}
	items, err := c.table.BatchGet(ctx, keys)
	if err != nil {
		return fmt.Errorf("lifecycle: reading the references of chat %s: %w", ch.ID, err)
	}
	found := make(map[store.Key]store.Item, len(items))
	for _, it := range items {
		found[it.Key] = it
	}
	now := c.now().UnixMilli()
	var fresh, wait []string
	for _, name := range names {
		if _, ok := found[store.Key{PK: pk, SK: store.ChatImageSK(name)}]; !ok {
			fresh = append(fresh, name)
		} else if it, ok := found[lockKey(tenant, name)]; ok && liveLease(it, now) {
			wait = append(wait, name)
		}
	}
	if err := c.reference(ctx, ch, fresh); err != nil {
		return err
	}
	return c.awaitLeases(ctx, tenant, append(wait, fresh...))
}

// lease is an image deletion's lease.
type lease struct {
	Until int64 `json:"u"` // Unix ms
	// Chat is the chat whose deletion holds it (its refName): a resumed
	// deletion of the same chat takes its own lease over.
	Chat string `json:"c"`
}

func lockKey(tenant, name string) store.Key {
	return store.Key{PK: store.RefPK(tenant, name), SK: store.LockSK}
}

// liveLease reports whether a lease item is held at now (Unix ms).
func liveLease(it store.Item, now int64) bool {
	var l lease
	return json.Unmarshal(it.Body, &l) == nil && l.Until > now
}

// awaitLeases returns once no live deletion lease is held on any of the
// images, polling them in one batch read, or answers an outage after
// leaseWait.
func (c *Chats) awaitLeases(ctx context.Context, tenant string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	deadline := time.Now().Add(leaseWait)
	keys := make([]store.Key, len(names))
	for i, name := range names {
		keys[i] = lockKey(tenant, name)
	}
	for {
		items, err := c.table.BatchGet(ctx, keys)
		if err != nil {
			return fmt.Errorf("lifecycle: reading the leases of %d images: %w", len(keys), err)
		}
		now := c.now().UnixMilli()
		keys = keys[:0]
		for _, it := range items {
			if liveLease(it, now) {
				keys = append(keys, it.Key)
			}
		}
		if len(keys) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return store.Unavailable("lifecycle lease", fmt.Errorf("image %s is being deleted", strings.TrimPrefix(keys[0].PK, store.RefPK(tenant, ""))))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func uniq(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

// releaseImage removes the chat's reference to an image and deletes the
// image when no other chat names it. It reports whether it deleted it.
func (c *Chats) releaseImage(ctx context.Context, ch chatid.Chat, name string) (bool, error) {
	tenant, chat := ch.Tenant, refName(ch)
	if err := c.table.Delete(ctx, store.Key{PK: store.RefPK(tenant, name), SK: store.RefChatSK(chat)}, 0); err != nil {
		return false, fmt.Errorf("lifecycle: removing the reference to image %s: %w", name, err)
	}
	if named, err := c.named(ctx, tenant, name); err != nil || named {
		return false, err
	}
	gone, err := c.deleteUnnamed(ctx, tenant, name, chat)
	if errors.Is(err, errLeased) {
		// Another chat's deletion holds it, or an erasure, which may
		// keep it for its chat: once the lease is gone, what names it
		// then tells.
		return c.dropUnnamed(ctx, tenant, name, chat)
	}
	return gone, err
}

var (
	// errLeased: another deletion holds the image's lease.
	errLeased = errors.New("another deletion holds the image's lease")
	// errLeaseGone: the lease kept changing hands while it was taken.
	errLeaseGone = errors.New("lease changed hands")
)

// deleteUnnamed takes the image's deletion lease for chat (a chat's
// refName, which a resumed deletion of the chat takes over; "" for no
// chat's) and deletes the image when, under it, no chat names it. It
// reports whether it deleted it; errLeased when another holder's lease is
// live, or took the lease first.
func (c *Chats) deleteUnnamed(ctx context.Context, tenant, name, chat string) (bool, error) {
	// Take the lease: a fresh item, or one whose time has passed.
	lk := lockKey(tenant, name)
	until := c.now().Add(ImageLease).UnixMilli()
	body, _ := json.Marshal(lease{Until: until, Chat: chat})
	version, err := c.takeLease(ctx, lk, body, chat)
	if err != nil {
		return false, fmt.Errorf("lifecycle: taking the lease of image %s: %w", name, err)
	}
	defer func() {
		_ = c.table.Delete(context.WithoutCancel(ctx), lk, version)
	}()
	// Under the lease: a reference made from here on waits for it.
	if named, err := c.named(ctx, tenant, name); err != nil || named {
		return false, err
	}
	dctx, cancel := context.WithDeadline(ctx, time.UnixMilli(until).Add(-5*time.Second))
	defer cancel()
	// An upload of it still waiting to be claimed goes too: the chat that
	// asked for it is the one being deleted.
	if err := c.images.Delete(dctx, tenant, name); err != nil {
		return false, fmt.Errorf("lifecycle: %w", err)
	}
	return true, nil
}

// leaseTries bounds takeLease's loop: a lease found taken and then gone
// was released meanwhile, and is taken again.
const leaseTries = 4

// takeLease takes the lease item at lk for chat, writing body: a fresh
// item, or one whose time has passed, or chat's own (not when chat is
// ""). It returns the version it wrote; errLeased when another holder's
// lease is live or took it first.
func (c *Chats) takeLease(ctx context.Context, lk store.Key, body []byte, chat string) (int64, error) {
	for range leaseTries {
		err := c.table.Create(ctx, store.Item{Key: lk, Body: body})
		if err == nil {
			return 1, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return 0, err
		}
		it, err := c.table.Get(ctx, lk)
		if errors.Is(err, store.ErrNotFound) {
			continue // released since: take it
		}
		if err != nil {
			return 0, err
		}
		var l lease
		if json.Unmarshal(it.Body, &l) == nil && l.Until > c.now().UnixMilli() && (l.Chat != chat || chat == "") {
			return 0, errLeased
		}
		err = c.table.Update(ctx, store.Item{Key: lk, Body: body, Version: it.Version + 1})
		if errors.Is(err, store.ErrConditionFailed) {
			return 0, errLeased // another deletion took it first
		}
		return it.Version + 1, err
	}
	return 0, store.Unavailable("lifecycle lease", errLeaseGone)
}

// named reports whether any chat references the image.
func (c *Chats) named(ctx context.Context, tenant, name string) (bool, error) {
	page, err := c.table.Query(ctx, store.Query{PK: store.RefPK(tenant, name), Prefix: store.RefChatPrefix, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("lifecycle: reading the references to image %s: %w", name, err)
	}
	return len(page.Items) > 0, nil
}
