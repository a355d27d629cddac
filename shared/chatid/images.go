package chatid

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// An incarnation names an image while its partition holds the reference
// store.ChatImageSK(name) (written by an append that logged the image, or a
// hook that stored or claimed it for the chat). A deleted incarnation keeps
// none, nor does an image the chat stopped naming. The before-request hook
// restores, links and describes a ref only through a chat that names its
// image, and a local signed link is served only while the chat it was made
// through names it.

// Named returns the chat's current incarnation, as links to its images
// are made through, and which of names it names: one read of the chat's
// identity and one batch read of its references, however many names.
func (r *Registry) Named(ctx context.Context, tenant, chat string, names []string) (store.LinkChat, map[string]bool, error) {
	cur, _, err := r.Current(ctx, tenant, chat)
	if err != nil {
		return store.LinkChat{}, nil, err
	}
	named := make(map[string]bool, len(names))
	if len(names) == 0 {
		return cur.LinkChat(), named, nil
	}
	keys := make([]store.Key, 0, len(names))
	for _, name := range names {
		keys = append(keys, store.Key{PK: cur.PK(), SK: store.ChatImageSK(name)})
	}
	items, err := r.table.BatchGet(ctx, keys)
	if err != nil {
		return store.LinkChat{}, nil, fmt.Errorf("chatid: reading chat %s's references to images: %w", chat, err)
	}
	for _, it := range items {
		named[strings.TrimPrefix(it.SK, store.ChatImagePrefix)] = true
	}
	return cur.LinkChat(), named, nil
}

// NamedThrough tells whether a link to key made through chat may be
// served (embedded.LinkCheck): key is an image of chat's tenant, and that
// incarnation names it; one read. The zero LinkChat names nothing.
func (r *Registry) NamedThrough(ctx context.Context, chat store.LinkChat, key string) (bool, error) {
	name, ok := strings.CutPrefix(key, store.ImageKey(chat.Tenant, ""))
	if chat.Tenant == "" || chat.Chat == "" || !ok || !refs.ValidName(name) {
		return false, nil
	}
	c := Chat{Tenant: chat.Tenant, ID: chat.Chat, Inc: chat.Inc}
	_, err := r.table.Get(ctx, store.Key{PK: c.PK(), SK: store.ChatImageSK(name)})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("chatid: reading chat %s's reference to image %s: %w", chat.Chat, name, err)
	}
	return true, nil
}
