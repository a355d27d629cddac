package transcript

import (
	"context"
	"fmt"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
)

// Names reports whether the chat names the image: its current incarnation
// recorded a reference to it (an append that logged it, a hook that stored
// or claimed it for the chat). A deleted chat, an earlier incarnation of
// the id, or another chat of the tenant naming it does not count. With no
// Chats configured no references are recorded, and every chat names every
// image of its tenant.
func (l *Log) Names(ctx context.Context, tenant, chat, name string) (bool, error) {
	if l.chats == nil {
		return true, nil
	}
	cur, _, err := l.ids.Current(ctx, tenant, chat)
	if err != nil {
		return false, err
	}
	return l.ids.NamedThrough(ctx, cur.LinkChat(), store.ImageKey(tenant, name))
}

// ChatImage reads a stored image through a chat that names it (Names):
// store.ErrNotFound when the chat does not name it, as when it is not
// stored, so a chat tells nothing of the images only other chats name.
func (l *Log) ChatImage(ctx context.Context, tenant, chat, name string) (images.Image, error) {
	ok, err := l.Names(ctx, tenant, chat, name)
	if err != nil {
		return images.Image{}, err
	}
	if !ok {
		return images.Image{}, fmt.Errorf("image %s of chat %s: %w", name, chat, store.ErrNotFound)
	}
	return l.imgs.Get(ctx, tenant, name)
}
