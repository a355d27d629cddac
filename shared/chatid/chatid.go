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
//	id   {"n": "<incarnation>"}
//
// An incarnation is 16 random hex digits; its rows live in the partition
// store.ChatPK(tenant, chat+"~"+incarnation) and its texts under
// store.TextPrefix(tenant, chat+"~"+incarnation) ('~' is not allowed in a
// chat id, so these never meet another chat's keys). A chat first written
// before incarnations were recorded keeps its rows in the home partition and
// its texts under store.TextPrefix(tenant, chat): its incarnation is "", and
// its identity item, written at its next append, says so.
//
// The first append to an id opens an incarnation (Open), a deletion retires
// it last (Retire); every reader and writer asks Current, one read of the
// chat's own partition. Nothing caches an identity.
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
	Inc string `json:"n"`
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
	it, err := r.table.Get(ctx, Home(tenant, chat))
	if errors.Is(err, store.ErrNotFound) {
		return Chat{Tenant: tenant, ID: chat}, false, nil
	}
	if err != nil {
		return Chat{}, false, fmt.Errorf("chatid: reading the identity of chat %s: %w", chat, err)
	}
	c, err := decode(tenant, chat, it)
	return c, err == nil, err
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

func decode(tenant, chat string, it store.Item) (Chat, error) {
	var id identity
	if err := json.Unmarshal(it.Body, &id); err != nil || !ValidInc(id.Inc) {
		return Chat{}, fmt.Errorf("chatid: the identity item of chat %s is corrupt (%q)", chat, it.Body)
	}
	return Chat{Tenant: tenant, ID: chat, Inc: id.Inc}, nil
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
		c, recorded, err := r.Current(ctx, tenant, chat)
		if err != nil || recorded {
			return c, err
		}
		// A chat written before incarnations has its first entry in the
		// home partition. (A read of one item: the hooks' functions may
		// get items but not query.)
		_, err = r.table.Get(ctx, store.Key{PK: store.ChatPK(tenant, chat), SK: store.EntrySK(0)})
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.Inc = newInc()
		case err != nil:
			return Chat{}, fmt.Errorf("chatid: reading chat %s: %w", chat, err)
		}
		body, _ := json.Marshal(identity{Inc: c.Inc})
		err = r.table.Create(ctx, store.Item{Key: Home(tenant, chat), Body: body})
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return Chat{}, fmt.Errorf("chatid: recording the identity of chat %s: %w", chat, err)
		}
		// A concurrent append opened it first: take its incarnation.
	}
	return Chat{}, store.Unavailable("chatid open", fmt.Errorf("chat %s: its identity keeps changing", chat))
}

// Retire removes c's identity item, when it still names c: the last step
// of c's deletion, after which the id opens a new incarnation.
func (r *Registry) Retire(ctx context.Context, c Chat) error {
	k := Home(c.Tenant, c.ID)
	it, err := r.table.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chatid: reading the identity of chat %s: %w", c.ID, err)
	}
	cur, err := decode(c.Tenant, c.ID, it)
	if err == nil && cur != c {
		return nil // another incarnation's: not ours to remove
	}
	// A corrupt item is removed too: the chat it named is being deleted.
	err = r.table.Delete(ctx, k, it.Version)
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("chatid: removing the identity of chat %s: %w", c.ID, err)
	}
	return nil
}

func newInc() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
