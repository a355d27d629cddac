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
// Every writer of images for a chat (an append or import, after-tool,
// offload-input, an upload target) follows one order (Hold): it prepares
// its images (checked and named, nothing stored), records the chat's
// references to every name, waits out any deletion lease of them, and only
// then stores or claims them: an append stores its inline images then,
// and refuses a ref block to an image that is gone. A deletion takes the
// lease first, then looks for references, and deletes the blob only when
// there are none. So either the deletion sees the new reference and keeps
// the image, or the writer sees the lease and finds the image gone once the
// deletion is done: an image named again while it is being deleted
// survives, and no append answers 200 naming an image that is then gone.
// A deletion of the chat itself begun while the writer stores may release
// the images before they are there: Hold looks at the chat again after the
// store, and deletes those no chat names then (stillHeld).
package lifecycle

import (
	"context"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
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
	// ScanInCall is Config.ScanInCall's default: ten reads of the log.
	ScanInCall = 10 * scanChunk
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
	// ScanInCall is the most entries a chat may hold for an erasure by
	// match or by images to look for its messages in the request
	// (ScanInCall when 0); in a larger chat, with a queue, the erase task
	// looks for them.
	ScanInCall int64
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
	// scanInCall: Config.ScanInCall.
	scanInCall int64
	settle     time.Duration
	now        func() time.Time
	scrub      Scrubber
}

// New returns Chats over cfg; Table and Blobs are required.
func New(cfg Config) *Chats {
	c := &Chats{table: cfg.Table, blobs: cfg.Blobs, ids: chatid.New(cfg.Table), images: cfg.Images, linker: cfg.Linker, queue: cfg.Queue, steps: cfg.Steps, scanInCall: cfg.ScanInCall, settle: cfg.SettleAfter, now: cfg.Now, scrub: cfg.Scrubber}
	if c.now == nil {
		c.now = time.Now
	}
	if c.images == nil {
		c.images = images.New(cfg.Blobs)
	}
	if c.scanInCall <= 0 {
		c.scanInCall = ScanInCall
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
