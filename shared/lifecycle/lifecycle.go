// Package lifecycle is what a tenant does with whole chats: list them,
// read one back, and delete one with the images only it used.
//
// Chats is the part the transcript and memory are built on: it admits
// appends (opening the chat's incarnation, see chatid), keeps the index
// and the image references, and deletes. Routes, built on Chats, the
// transcript and memory, lists, reads back, exports and imports. So they
// are wired in one order: Chats, then the transcript and memory, then
// Routes.
//
// A deletion removes one incarnation: its partition, its texts and its
// references, then its index item, then its identity item. Its queue
// messages name the incarnation, so one delivered after the id names a new
// chat deletes nothing of it.
//
// What lifecycle keeps of a chat's state (its last activity, and while it
// is being deleted the deletion's progress) is in the chat's identity item
// (package chatid), in the chat's own home partition: the read that tells
// an append which incarnation to write also tells it whether the chat is
// being deleted, and no append reads or writes a key its tenant's other
// chats share.
//
// Three kinds of items, besides the chat's own partitions, keep it:
//
//   - the tenant's chat index, one partition per tenant (IndexPK): an item
//     per chat, written when the chat is created and when its own
//     retention is set, removed by its deletion; the chat's own retention
//     is kept there. Listing and the retention sweep page through it and
//     read the listed chats' identity items in batches. (An index item
//     written before the state moved to the identity item also holds the
//     chat's activity and deletion: read while the identity item has no
//     state, and moved there by the chat's next change.)
//   - image references: for each image a chat names, an item in the
//     partition of the chat's incarnation (i/<name>) and one in the image's
//     partition (RefPK: c/<chat>~<incarnation>, or c/<chat> for a chat
//     written before incarnations were recorded).
//     The first tells a deletion which images the chat used, the second
//     whether any other chat still names one.
//   - an image's deletion lease (RefPK: lock), held while its blob is
//     deleted.
//
// An append records its references before it writes an entry, then waits
// out any deletion lease of the images it names, then checks the images
// are stored: it stores again those it carries inline (and those a zoom
// result's page names), and refuses a ref block to one that is gone. The
// hooks (after-tool, offload-input, uploads) record theirs the same way
// (Hold) before they store or claim an image. A deletion takes the lease
// first, then looks for references, and deletes the blob only when there
// are none. So either the deletion sees the new reference and keeps the
// image, or the append sees the lease and finds the image gone once the
// deletion is done: an image named again while it is being deleted
// survives, and no append answers 200 naming an image that is then gone.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// Tunables.
const (
	// ImageLease is how long an image deletion may hold its lease on the
	// image; appends naming the image wait for it.
	ImageLease = 30 * time.Second
	// StepItems is how many items one deletion step removes.
	StepItems = 100
	// StepsPerCall bounds the steps one call (a request, a queue message)
	// runs before it hands the rest to the queue.
	StepsPerCall = 20
	// CallBudget bounds the time one call spends deleting before it hands
	// the rest on, well inside API Gateway's 30 s and Lambda's timeout.
	CallBudget = 10 * time.Second
	// SettleAfter is how long after a deletion retires its incarnation the
	// incarnation is swept once more (Config.SettleAfter). A writer that
	// found the incarnation current (a build writing a node, an append
	// admitted before the deletion marked the chat) may write after the
	// deletion's last page; the sweep removes what it wrote. It is longer
	// than any call that can hold such a finding: each is bounded by its
	// function's timeout (compact's 120 s is the longest), and within the
	// queue's longest delay (15 minutes).
	SettleAfter = 5 * time.Minute
	// concurrency bounds the store calls one deletion step, or one append's
	// image tracking, makes at once.
	concurrency = 8
	// MaxListLimit bounds a page of chats or messages.
	MaxListLimit = 100
	// indexRetries bounds the optimistic-locking loop on a chat's state
	// and on an index item.
	indexRetries = 16
	// ActivityStep is the precision of a chat's last activity: an append
	// within it of the last one recorded writes no index item.
	ActivityStep = time.Minute
	// leaseWait is how long an append waits for an image's lease, polling,
	// before it answers 503 (a lease lasts one object deletion, or ImageLease
	// when its holder died).
	leaseWait = 10 * time.Second
)

// Memory is what the lifecycle needs of the summary memory: a glance for
// listing, and the notice of an import's entries.
type Memory interface {
	Glance(ctx context.Context, c chatid.Chat) (wire.MemoryGlance, error)
	transcript.Notifier
}

// Config wires Chats. Table and Blobs are required; every other field's
// zero value is its default.
type Config struct {
	Table store.Table
	Blobs store.Blobs
	// Images is the image store appends write (with its uploads' staging);
	// nil: images.New(Blobs).
	Images *images.Store
	// Linker signs the image links a read-back shows (ImagesAsLinks); nil
	// shows refs without links.
	Linker store.Linker
	// Queue carries the rest of a large deletion (tasks.Delete) and the
	// sweep after each deletion (tasks.Settle); nil runs
	// every deletion to its end in the call, with no sweep after it.
	Queue store.Queue
	// SettleAfter is the delay of the sweep after a deletion (SettleAfter
	// when 0; at most the queue's longest delay, 15 minutes).
	SettleAfter time.Duration
	// Steps bounds the deletion steps of one call (StepsPerCall when 0).
	Steps int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Scrubber clears the bytes removed items leave in the store's file
	// (the embedded store); a deletion is done only once it has run. Nil:
	// the stores leave none (AWS, where a deleted item or object is gone
	// but for the backups docs/deploy.md describes).
	Scrubber Scrubber
}

// Scrubber is a store whose file keeps what was removed from it until it
// is scrubbed (embedded.DB).
type Scrubber interface {
	Scrub(ctx context.Context) error
}

// Chats keeps the tenant's chat index and image references, admits
// appends and deletes chats.
type Chats struct {
	table  store.Table
	blobs  store.Blobs
	ids    *chatid.Registry
	images *images.Store
	linker store.Linker
	queue  store.Queue
	steps  int
	settle time.Duration
	now    func() time.Time
	scrub  Scrubber
}

// New returns Chats over cfg; Table and Blobs are required.
func New(cfg Config) *Chats {
	c := &Chats{table: cfg.Table, blobs: cfg.Blobs, ids: chatid.New(cfg.Table), images: cfg.Images, linker: cfg.Linker, queue: cfg.Queue, steps: cfg.Steps, settle: cfg.SettleAfter, now: cfg.Now, scrub: cfg.Scrubber}
	if c.now == nil {
		c.now = time.Now
	}
	if c.images == nil {
		c.images = images.New(cfg.Blobs)
	}
	if c.steps <= 0 {
		c.steps = StepsPerCall
	}
	if c.settle <= 0 {
		c.settle = SettleAfter
	}
	return c
}

// Routes serves the chat lifecycle over Chats, the log it reads back and
// imports into, and the memory it lists and tells of an import.
type Routes struct {
	*Chats
	log    *transcript.Log
	memory Memory
}

// NewRoutes returns the routes; memory may be nil (nothing is listed of
// it, and an import's entries are found by memory's next call).
func NewRoutes(chats *Chats, log *transcript.Log, memory Memory) *Routes {
	return &Routes{Chats: chats, log: log, memory: memory}
}

// chatState is what lifecycle keeps of a chat in its identity item.
type chatState struct {
	// Activity is the last append's time, Unix ms.
	Activity int64 `json:"a"`
	// Deleting is when the deletion started, Unix ms; 0 when none.
	Deleting int64 `json:"x,omitempty"`
	// Removed and Images count what the deletion removed so far.
	Removed int64 `json:"dn,omitempty"`
	Images  int64 `json:"di,omitempty"`
}

// indexEntry is a chat's item in its tenant's index. Items written before
// the state moved to the identity item also hold the chat's state.
type indexEntry struct {
	chatState
	// Retention is the chat's own retention in days; nil: its tenant's.
	Retention *int `json:"rd,omitempty"`
}

func indexKey(tenant, chat string) store.Key {
	return store.Key{PK: store.IndexPK(tenant), SK: store.IndexChatSK(chat)}
}

// chatRecord is a chat as lifecycle reads it: its identity item and the
// state it keeps there.
type chatRecord struct {
	id    chatid.Record
	state chatState
	// legacy: the identity item holds no state yet, and state is what the
	// chat's index item held (zero when it has none); the next write
	// moves it to the identity item.
	legacy bool
	// listed: the chat's index item is known to exist.
	listed bool
}

// stateOf is the state of the chat whose identity item is rec, falling
// back to the index item entry (when read: ok) of a chat whose identity
// item holds none.
func stateOf(rec chatid.Record, entry indexEntry, ok bool) (chatRecord, error) {
	r := chatRecord{id: rec, listed: ok}
	if rec.State == nil {
		r.legacy, r.state = true, entry.chatState
		return r, nil
	}
	if err := json.Unmarshal(rec.State, &r.state); err != nil {
		return chatRecord{}, fmt.Errorf("lifecycle: the state of chat %s is corrupt: %w", rec.Chat.ID, err)
	}
	return r, nil
}

// load reads the chat's identity item: one read of its own partition,
// and of the index only for a chat whose identity item holds no state yet
// (created by this call's write, or last written before the state moved).
func (c *Chats) load(ctx context.Context, tenant, chat string) (chatRecord, error) {
	rec, err := c.ids.Read(ctx, tenant, chat)
	if err != nil {
		return chatRecord{}, err
	}
	if rec.State != nil {
		return stateOf(rec, indexEntry{}, false)
	}
	e, ok, err := c.getIndex(ctx, tenant, chat)
	if err != nil {
		return chatRecord{}, err
	}
	return stateOf(rec, e, ok)
}

// getIndex reads the chat's index item.
func (c *Chats) getIndex(ctx context.Context, tenant, chat string) (indexEntry, bool, error) {
	it, err := c.table.Get(ctx, indexKey(tenant, chat))
	if errors.Is(err, store.ErrNotFound) {
		return indexEntry{}, false, nil
	}
	if err != nil {
		return indexEntry{}, false, fmt.Errorf("lifecycle: reading the index of %s: %w", chat, err)
	}
	var e indexEntry
	if err := json.Unmarshal(it.Body, &e); err != nil {
		return indexEntry{}, false, fmt.Errorf("lifecycle: index item of %s is corrupt: %w", chat, err)
	}
	return e, true, nil
}

// update applies fn to the chat's state and writes it in the chat's
// identity item under optimistic locking, listing the chat in its
// tenant's index first when it is not (so no chat exists unlisted, where
// no sweep finds it). Writing the state of an id with no incarnation
// opens one. fn returning errNoChange writes nothing.
func (c *Chats) update(ctx context.Context, tenant, chat string, fn func(r *chatRecord) error) (chatRecord, error) {
	for range indexRetries {
		r, err := c.load(ctx, tenant, chat)
		if err != nil {
			return chatRecord{}, err
		}
		if err := fn(&r); errors.Is(err, errNoChange) {
			return r, nil
		} else if err != nil {
			return chatRecord{}, err
		}
		if r.legacy && !r.listed {
			if err := c.list(ctx, tenant, chat); err != nil {
				return chatRecord{}, err
			}
		}
		r.id.State, err = json.Marshal(r.state)
		if err != nil {
			return chatRecord{}, err
		}
		r.id, err = c.ids.Write(ctx, r.id)
		if err == nil {
			r.legacy, r.listed = false, true
			return r, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return chatRecord{}, fmt.Errorf("lifecycle: writing the state of %s: %w", chat, err)
		}
	}
	return chatRecord{}, store.Unavailable("lifecycle state", fmt.Errorf("chat %s: too many concurrent writers", chat))
}

// list writes the chat's index item when it has none: once per chat.
func (c *Chats) list(ctx context.Context, tenant, chat string) error {
	err := c.table.Create(ctx, store.Item{Key: indexKey(tenant, chat), Body: []byte("{}")})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("lifecycle: listing chat %s in the index: %w", chat, err)
	}
	return nil
}

// listed is a chat of a page of its tenant's index, read with its
// identity item.
type listed struct {
	chat  string
	entry indexEntry
	chatRecord
}

// readListed decodes a page of the tenant's index and reads the identity
// items of its chats in one batch.
func (c *Chats) readListed(ctx context.Context, tenant string, items []store.Item) ([]listed, error) {
	out := make([]listed, len(items))
	keys := make([]store.Key, len(items))
	for i, it := range items {
		out[i].chat = strings.TrimPrefix(it.SK, store.IndexChatPrefix)
		if err := json.Unmarshal(it.Body, &out[i].entry); err != nil {
			return nil, fmt.Errorf("lifecycle: index item %s is corrupt: %w", it.SK, err)
		}
		keys[i] = chatid.Home(tenant, out[i].chat)
	}
	found, err := c.table.BatchGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: reading the identities of %d chats: %w", len(keys), err)
	}
	byKey := make(map[store.Key]store.Item, len(found))
	for _, it := range found {
		byKey[it.Key] = it
	}
	for i := range out {
		rec := chatid.Record{Chat: chatid.Chat{Tenant: tenant, ID: out[i].chat}}
		if it, ok := byKey[keys[i]]; ok {
			if rec, err = chatid.Decode(tenant, out[i].chat, it); err != nil {
				return nil, err
			}
		}
		if out[i].chatRecord, err = stateOf(rec, out[i].entry, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// updateIndex applies fn to the chat's index item and writes it under
// optimistic locking (creating it when there is none).
func (c *Chats) updateIndex(ctx context.Context, tenant, chat string, fn func(e *indexEntry)) error {
	for range indexRetries {
		it, err := c.table.Get(ctx, indexKey(tenant, chat))
		var e indexEntry
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("lifecycle: reading the index of %s: %w", chat, err)
		default:
			if err := json.Unmarshal(it.Body, &e); err != nil {
				return fmt.Errorf("lifecycle: index item of %s is corrupt: %w", chat, err)
			}
		}
		fn(&e)
		body, err := rawjson.Of(e)
		if err != nil {
			return err
		}
		next := store.Item{Key: indexKey(tenant, chat), Body: body, Version: it.Version + 1}
		if it.Version == 0 {
			err = c.table.Create(ctx, next)
		} else {
			err = c.table.Update(ctx, next)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return fmt.Errorf("lifecycle: writing the index of %s: %w", chat, err)
		}
	}
	return store.Unavailable("lifecycle index", fmt.Errorf("chat %s: too many concurrent writers", chat))
}

var errNoChange = errors.New("no change")

// deletingError is the answer to an append or delete that finds the chat
// being deleted.
func deletingError(chat string) error {
	return &fault.Error{Code: fault.Deleting, Message: fmt.Sprintf("chat %s is being deleted; once that finishes its id names a new, empty chat", chat)}
}

// Opening admits a write of a chat's own state before or between its
// appends (its memory settings) as an append is admitted: it records the
// chat's activity, refusing while the chat is being deleted, and opens the
// chat's incarnation.
func (c *Chats) Opening(ctx context.Context, tenant, chat string) (chatid.Chat, error) {
	r, err := c.touch(ctx, tenant, chat)
	return r.id.Chat, err
}

// Appending is transcript.Chats: from one read of the chat's identity item
// it refuses a chat being deleted and finds the chat's incarnation (opening
// one, and recording the chat's activity, when due), records there the
// images it names (Hold), and returns the incarnation. Images not stored
// then (deleted before their references were recorded) are handed to
// storeMissing, which stores them again or refuses. The append stored its
// images before this call, so the chat is looked at again then, as Hold
// does after its write (stillHeld); refused while the chat is being
// deleted, the images it stored that no chat names are deleted.
func (c *Chats) Appending(ctx context.Context, tenant, chat string, names []string, storeMissing func(ctx context.Context, missing []string) error) (chatid.Chat, error) {
	// The incarnation and the deletion's mark are one item: a deletion
	// marks the item naming the incarnation it deletes, so it never misses
	// one an append writes to.
	names = uniq(slices.Clone(names))
	r, err := c.touch(ctx, tenant, chat)
	if err != nil {
		if r.state.Deleting != 0 && len(names) > 0 {
			// The append stored its images before it was refused, maybe
			// after the deletion released them.
			if serr := c.stillHeld(ctx, r.id.Chat, names); serr != nil {
				return chatid.Chat{}, serr
			}
		}
		return chatid.Chat{}, err
	}
	ch := r.id.Chat
	if err := c.hold(ctx, ch, names); err != nil {
		return chatid.Chat{}, err
	}
	var (
		mu      sync.Mutex
		missing []string
	)
	err = inParallel(ctx, names, func(ctx context.Context, name string) error {
		_, err := c.images.Head(ctx, tenant, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			mu.Lock()
			missing = append(missing, name)
			mu.Unlock()
		case err != nil && store.IsOutage(err):
			return err
		}
		// Any other failure (S3 may answer a HEAD with 403): the image is
		// treated as stored, as every other reader does.
		return nil
	})
	if err != nil {
		return chatid.Chat{}, err
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		if err := storeMissing(ctx, missing); err != nil {
			return chatid.Chat{}, err
		}
	}
	// The append stored its images before this call, and storeMissing
	// since: a deletion begun meanwhile may have released them first.
	return ch, c.stillHeld(ctx, ch, names)
}

// Deleted is transcript.Chats: an append to the incarnation ch that found
// a row of its own gone is refused (409 deleting) when ch is being deleted
// or has been; nil when ch is its chat's and not being deleted.
func (c *Chats) Deleted(ctx context.Context, ch chatid.Chat) error {
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil {
		return err
	}
	if r.live(ch) {
		return nil
	}
	return deletingError(ch.ID)
}

// live reports whether ch is the chat's current incarnation, not being
// deleted.
func (r chatRecord) live(ch chatid.Chat) bool {
	return r.id.Recorded && r.id.Chat == ch && r.state.Deleting == 0
}

// refName is how the image's side of a reference names the incarnation
// ch: the chat id and the incarnation, so a late step of a deleted
// incarnation's deletion never removes the reference of the next.
func refName(ch chatid.Chat) string {
	if ch.Inc == "" {
		return ch.ID
	}
	return ch.ID + "~" + ch.Inc
}

// touch records an append's time as the chat's last activity, refusing
// while the chat is being deleted, and returns the chat with its
// incarnation (opened when the id had none). An append within
// ActivityStep of the last one recorded writes nothing. Refused, it
// returns the chat as it found it being deleted.
func (c *Chats) touch(ctx context.Context, tenant, chat string) (chatRecord, error) {
	now := c.now().UnixMilli()
	var deleting chatRecord
	r, err := c.update(ctx, tenant, chat, func(r *chatRecord) error {
		if r.state.Deleting != 0 {
			deleting = *r
			return deletingError(chat)
		}
		if r.id.Recorded && !r.legacy && r.state.Activity != 0 && now-r.state.Activity < ActivityStep.Milliseconds() {
			return errNoChange // recent enough: no write
		}
		r.state.Activity = max(r.state.Activity, now)
		return nil
	})
	if err != nil {
		return deleting, err
	}
	return r, nil
}

// Hold is what the hooks call to store or claim images for a chat
// (after-tool, offload-input, uploads): it records that the chat names
// them, as an append does, so deleting the chat (or its retention)
// deletes them when no other chat names them, and deleting another chat
// keeps them; then it runs write (when not nil), which stores or claims
// them. It refuses while the chat is being deleted, and counts as the
// chat's activity. write runs once no deletion of any of the images is
// in flight: what it stores or checks stays stored while the chat names
// it. An error of write is returned as it is.
//
// On the hot path, images the chat names already, it is a read of the
// chat's identity item and one batch read of the chat's references and
// the images' leases, before write; and one more read of the identity
// item after it.
func (c *Chats) Hold(ctx context.Context, tenant, chat string, names []string, write func(context.Context) error) error {
	names = uniq(slices.Clone(names))
	if len(names) == 0 {
		if write == nil {
			return nil
		}
		return write(ctx)
	}
	r, err := c.touch(ctx, tenant, chat)
	if err != nil {
		return err
	}
	ch := r.id.Chat
	if err := c.hold(ctx, ch, names); err != nil {
		return err
	}
	if write == nil {
		return nil
	}
	if err := write(ctx); err != nil {
		return err
	}
	return c.stillHeld(ctx, ch, names)
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
// deletes the image when that was the last.
func (c *Chats) stillHeld(ctx context.Context, ch chatid.Chat, names []string) error {
	if len(names) == 0 {
		return nil
	}
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil {
		return err
	}
	if r.live(ch) {
		return nil
	}
	return inParallel(ctx, names, func(ctx context.Context, name string) error {
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
	err = inParallel(ctx, fresh, func(ctx context.Context, name string) error {
		for _, k := range []store.Key{{PK: store.RefPK(tenant, name), SK: store.RefChatSK(refName(ch))}, {PK: pk, SK: store.ChatImageSK(name)}} {
			if err := c.table.Create(ctx, store.Item{Key: k, Body: []byte("{}")}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return fmt.Errorf("lifecycle: recording image %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
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
		// Another chat's deletion holds it; it finds no reference
		// either, and deletes the image (or its resumption does).
		return false, nil
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
