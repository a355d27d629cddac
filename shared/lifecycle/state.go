// What lifecycle keeps of a chat in its identity item: its activity and
// its deletion's mark and progress; appends and writes of the chat's own
// state are admitted here.

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/store"
)

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

// touch records an append's time as the chat's last activity, refusing
// while the chat is being deleted, and returns the chat with its
// incarnation (opened when the id had none). An append within
// ActivityStep of the last one recorded writes nothing.
func (c *Chats) touch(ctx context.Context, tenant, chat string) (chatRecord, error) {
	now := c.now().UnixMilli()
	return c.update(ctx, tenant, chat, func(r *chatRecord) error {
		if r.state.Deleting != 0 {
			return deletingError(chat)
		}
		if r.id.Recorded && !r.legacy && r.state.Activity != 0 && now-r.state.Activity < ActivityStep.Milliseconds() {
			return errNoChange // recent enough: no write
		}
		r.state.Activity = max(r.state.Activity, now)
		return nil
	})
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
