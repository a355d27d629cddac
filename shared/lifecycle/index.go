// The tenant's chat index: an item per chat, its own retention.

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

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
