// Package chatid says which incarnation of a chat id is current. A chat id
// names a new, empty chat once its chat is deleted; each such chat is an
// incarnation of the id, and everything of it is keyed by the incarnation:
// its rows, its texts, the cache entries of any process, its queue
// messages. So nothing a deleted incarnation left behind (a warm process's
// cache, a build message delivered late, a deletion step run twice) can be
// read as, or written into, the next one.
//
// # Layout
//
// The chat's home partition store.ChatPK(tenant, chat) holds its identity
// item:
//
//	id   {"n": "<incarnation>", "s": <state>}
//
// The state is its owner's (package lifecycle: the chat's last activity
// and its deletion's progress), opaque here: kept in the identity item so
// that one read of the chat's own partition tells an append both which
// incarnation it writes and whether it may. Items written before the state
// was kept have none.
//
// An incarnation is 16 random hex digits; its rows live in the partition
// store.ChatPK(tenant, chat+"~"+incarnation) and its texts under
// store.TextPrefix(tenant, chat+"~"+incarnation) ('~' is not allowed in a
// chat id, so these never meet another chat's keys). A chat first written
// before incarnations were recorded keeps its rows in the home partition and
// its texts under store.TextPrefix(tenant, chat): its incarnation is "", and
// its identity item, written at its next append, says so.
//
// The first append to an id opens an incarnation (Open, or Write with the
// state), a deletion retires it last (Retire); every reader and writer asks
// Current or Read, one read of the chat's own partition. Nothing caches an
// identity.
package chatid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/store"
)

// Chat is one incarnation of a chat.
type Chat struct {
	Tenant string
	ID     string
	// Inc is the incarnation: random hex, or "" for a chat written before
	// incarnations were recorded (and for an id with no chat yet).
	Inc string
}

// key is the chat part of the incarnation's partition and text prefix.
func (c Chat) key() string {
	if c.Inc == "" {
		return c.ID
	}
	return c.ID + "~" + c.Inc
}

// PK is the partition of the incarnation's rows.
func (c Chat) PK() string { return store.ChatPK(c.Tenant, c.key()) }

// LinkChat is the incarnation as a link to one of its images is made
// through (store.Linker).
func (c Chat) LinkChat() store.LinkChat {
	return store.LinkChat{Tenant: c.Tenant, Chat: c.ID, Inc: c.Inc}
}

// TextPrefix is where the incarnation's texts too big for their rows are
// kept, so its deletion deletes them without asking whether another chat
// still needs one.
func (c Chat) TextPrefix() string { return store.TextPrefix(c.Tenant, c.key()) }

// Home is the key of the chat's identity item.
func Home(tenant, chat string) store.Key {
	return store.Key{PK: store.ChatPK(tenant, chat), SK: store.IdentitySK}
}

// ValidInc reports whether s can be an incarnation.
func ValidInc(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 16 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// identity is the identity item's body.
type identity struct {
	Inc   string          `json:"n"`
	State json.RawMessage `json:"s,omitempty"`
}

// Record is a chat id's identity item as read.
type Record struct {
	// Chat is the current incarnation ("" when none is recorded).
	Chat Chat
	// Recorded: the id has an identity item.
	Recorded bool
	// Version is the item's, which a Write is conditional on.
	Version int64
	// State is the owner's part of the item; nil when none is kept.
	State json.RawMessage
}

// Registry reads and writes identity items in a table. It keeps nothing in
// memory: an identity read from a cache could name a deleted incarnation.
type Registry struct {
	table store.Table
}

// New returns the registry over table.
func New(table store.Table) *Registry { return &Registry{table: table} }

// Current returns the chat's current incarnation and whether the id has
// one recorded. With none recorded it is incarnation "": the rows of a chat
// written before incarnations were recorded, or nothing.
func (r *Registry) Current(ctx context.Context, tenant, chat string) (Chat, bool, error) {
	rec, err := r.Read(ctx, tenant, chat)
	return rec.Chat, rec.Recorded, err
}

// Read returns the chat id's identity item: Recorded false, and
// incarnation "", when it has none.
func (r *Registry) Read(ctx context.Context, tenant, chat string) (Record, error) {
	it, err := r.table.Get(ctx, Home(tenant, chat))
	if errors.Is(err, store.ErrNotFound) {
		return Record{Chat: Chat{Tenant: tenant, ID: chat}}, nil
	}
	if err != nil {
		return Record{}, fmt.Errorf("chatid: reading the identity of chat %s: %w", chat, err)
	}
	return Decode(tenant, chat, it)
}

// Decode reads the identity item it of the chat, as a batch read of
// several chats' Home keys returns it.
func Decode(tenant, chat string, it store.Item) (Record, error) {
	var id identity
	if err := json.Unmarshal(it.Body, &id); err != nil || !ValidInc(id.Inc) {
		return Record{}, fmt.Errorf("chatid: the identity item of chat %s is corrupt (%q)", chat, it.Body)
	}
	return Record{Chat: Chat{Tenant: tenant, ID: chat, Inc: id.Inc}, Recorded: true, Version: it.Version, State: id.State}, nil
}

// Write stores rec.State in the chat's identity item, conditional on the
// item being as rec was read: an update of the item at rec.Version, or,
// when rec is not Recorded, the opening of the id's incarnation (as Open
// opens it) with the state. It returns the record as written, or
// store.ErrConditionFailed (wrapped) when the item changed since rec was
// read: read it again and redo the change.
func (r *Registry) Write(ctx context.Context, rec Record) (Record, error) {
	tenant, chat := rec.Chat.Tenant, rec.Chat.ID
	if !rec.Recorded {
		c, err := r.incarnation(ctx, tenant, chat)
		if err != nil {
			return Record{}, err
		}
		rec.Chat = c
	}
	body, err := json.Marshal(identity{Inc: rec.Chat.Inc, State: rec.State})
	if err != nil {
		return Record{}, fmt.Errorf("chatid: the state of chat %s: %w", chat, err)
	}
	it := store.Item{Key: Home(tenant, chat), Body: body, Version: rec.Version + 1}
	if rec.Recorded {
		err = r.table.Update(ctx, it)
	} else {
		err = r.table.Create(ctx, it)
	}
	if err != nil {
		return Record{}, fmt.Errorf("chatid: recording the identity of chat %s: %w", chat, err)
	}
	rec.Recorded, rec.Version = true, it.Version
	return rec, nil
}

// incarnation is the incarnation an id without an identity item opens: a
// new one, or "" for a chat written before incarnations, whose first entry
// is in the home partition. (A read of one item: the hooks' functions may
// get items but not query.)
func (r *Registry) incarnation(ctx context.Context, tenant, chat string) (Chat, error) {
	c := Chat{Tenant: tenant, ID: chat}
	_, err := r.table.Get(ctx, store.Key{PK: store.ChatPK(tenant, chat), SK: store.EntrySK(0)})
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.Inc = newInc()
	case err != nil:
		return Chat{}, fmt.Errorf("chatid: reading chat %s: %w", chat, err)
	}
	return c, nil
}

// IsCurrent reports whether c is its id's current incarnation. A writer
// that was handed c earlier (a queue message, a build in progress) asks it
// before it writes.
func (r *Registry) IsCurrent(ctx context.Context, c Chat) (bool, error) {
	cur, _, err := r.Current(ctx, c.Tenant, c.ID)
	if err != nil {
		return false, err
	}
	return cur == c, nil
}

// openTries bounds Open's loop: a lost create is followed by a read of the
// winner, which only a concurrent Retire can take away again.
const openTries = 4

// Open returns the chat's current incarnation, recording a new one when
// the id has none: the first append to a chat, or the first after its
// deletion. A chat whose rows predate incarnations (its home partition
// holds its first entry) is recorded as incarnation "", so it keeps
// reading them. Only appends and the hooks open, once they found the chat
// not being deleted.
func (r *Registry) Open(ctx context.Context, tenant, chat string) (Chat, error) {
	for range openTries {
		rec, err := r.Read(ctx, tenant, chat)
		if err != nil || rec.Recorded {
			return rec.Chat, err
		}
		rec, err = r.Write(ctx, rec)
		if err == nil {
			return rec.Chat, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return Chat{}, err
		}
		// A concurrent append opened it first: take its incarnation.
	}
	return Chat{}, store.Unavailable("chatid open", fmt.Errorf("chat %s: its identity keeps changing", chat))
}

// Retire removes c's identity item, when it still names c: the last step
// of c's deletion, after which the id opens a new incarnation. A state
// written meanwhile (the deletion's progress, recorded by another call)
// is read again, not kept.
func (r *Registry) Retire(ctx context.Context, c Chat) error {
	k := Home(c.Tenant, c.ID)
	for range retireTries {
		it, err := r.table.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("chatid: reading the identity of chat %s: %w", c.ID, err)
		}
		cur, err := Decode(c.Tenant, c.ID, it)
		if err == nil && cur.Chat != c {
			return nil // another incarnation's: not ours to remove
		}
		// A corrupt item is removed too: the chat it named is being deleted.
		err = r.table.Delete(ctx, k, it.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return fmt.Errorf("chatid: removing the identity of chat %s: %w", c.ID, err)
		}
	}
	return store.Unavailable("chatid retire", fmt.Errorf("chat %s: its identity keeps changing", c.ID))
}

// retireTries bounds Retire's loop: the item changes under it only while
// other calls of the same deletion record their progress.
const retireTries = 8

func newInc() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
