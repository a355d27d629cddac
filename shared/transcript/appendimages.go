package transcript

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// appendImages is what an append stores or claims, in the order every
// writer of images for a chat follows (Chats.Hold): prepared first (every
// inline image checked and named, nothing stored), then its names are held
// for the chat, then it is stored (store), and only then turned into
// drafts, which name what was stored.
type appendImages struct {
	l      *Log
	tenant string
	msgs   []pi.Message
	// inline is the inline images to store, at their blocks, prepared
	// (incoming; nil when there are none).
	inline   []images.Inline
	at       []imageRef
	incoming *images.Incoming
	// paged is a zoom result's image blocks its page names, with that
	// name's bytes: stored under that name already (restored when it is
	// gone), they add nothing to the log.
	paged []imageRef
	// claims is the names the ref blocks of user messages and tool
	// results carry, at claimAt: each must name a stored image.
	claims  []string
	claimAt []imageRef
}

// prepare checks msgs and prepares their images (images.Prepare: a
// refused image is a 400 naming its block), storing nothing.
func (l *Log) prepare(ctx context.Context, tenant string, msgs []pi.Message) (*appendImages, error) {
	if err := checkMessages(msgs); err != nil {
		return nil, err
	}
	a := &appendImages{l: l, tenant: tenant, msgs: msgs}
	a.claims, a.claimAt = refClaims(msgs)
	for i, m := range msgs {
		named := zoomPageNames(m)
		for j, b := range m.Content.Blocks {
			if b.Type != pi.TypeImage {
				continue
			}
			if named != nil && named[storedName(b)] {
				// Stored under that name already, if its bytes are the
				// name's; other bytes are an image like any other.
				same, err := l.imgs.Names(ctx, tenant, b.Name, b.Data)
				if err != nil {
					return nil, fmt.Errorf("transcript: checking image messages[%d].content[%d]: %w", i, j, err)
				}
				if same {
					a.paged = append(a.paged, imageRef{i, j})
					continue
				}
			}
			a.inline = append(a.inline, images.Inline{B64: b.Data, Named: b.Name, Field: fmt.Sprintf("messages[%d].content[%d].data", i, j)})
			a.at = append(a.at, imageRef{i, j})
		}
	}
	if len(a.inline) == 0 {
		return a, nil
	}
	var err error
	if a.incoming, err = prepareImages(ctx, a.inline); err != nil {
		return nil, err
	}
	return a, nil
}

// prepareImages is images.Prepare, a refused image named by its block.
func prepareImages(ctx context.Context, inline []images.Inline) (*images.Incoming, error) {
	incoming, err := images.Prepare(ctx, inline)
	if refused, ok := errors.AsType[*fault.Error](err); ok {
		return nil, imageError(refused.Field, refused.Err)
	}
	return incoming, err
}

// refClaims lists the names the ref blocks of the user messages and tool
// results carry, and where: a host that uploaded an image logs its ref
// block in place of its base64. A zoom result's refs its page names are
// stored already.
func refClaims(msgs []pi.Message) (names []string, at []imageRef) {
	for i, m := range msgs {
		if m.Role != pi.RoleUser && m.Role != pi.RoleToolResult {
			continue
		}
		named := zoomPageNames(m)
		for j, b := range m.Content.Blocks {
			if b.Type != pi.TypeText {
				continue
			}
			if name := refs.RefName(b.Text); name != "" && !named[name] {
				names = append(names, name)
				at = append(at, imageRef{i, j})
			}
		}
	}
	return names, at
}

// names lists every image name the append may store, claim or name: the
// names its inline images may be stored under (images.Incoming.Names),
// the names its page-named images carry, and every name its entries'
// texts hold, read from drafts whose image blocks name nothing yet.
func (a *appendImages) names() []string {
	var out []string
	if a.incoming != nil {
		out = slices.Clone(a.incoming.Names())
	}
	for _, at := range a.paged {
		out = append(out, storedName(a.msgs[at.msg].Content.Blocks[at.block]))
	}
	unnamed := make(map[imageRef]string, len(a.at))
	for _, at := range a.at {
		unnamed[at] = ""
	}
	for i, m := range a.msgs {
		for _, d := range messageDrafts(i, m, unnamed) {
			out = append(out, refs.Names(d.Text)...)
		}
	}
	return out
}

// store claims the ref blocks' images (images.Store.Claim: a ref to no
// image and no completed upload is a 400 naming its block, before any
// image is stored), stores the inline images and restores the page-named
// ones that are gone. It returns the name of every image block stored,
// by its position.
func (a *appendImages) store(ctx context.Context) (map[imageRef]string, error) {
	if len(a.claims) > 0 {
		if k, err := images.ClaimAll(ctx, a.l.imgs, a.tenant, a.claims); err != nil {
			field := fmt.Sprintf("messages[%d].content[%d]", a.claimAt[k].msg, a.claimAt[k].block)
			if images.Refused(err) {
				return nil, refusedBy(field, "does not name a stored image", err)
			}
			return nil, fmt.Errorf("transcript: claiming image %s: %w", field, err)
		}
	}
	names := make(map[imageRef]string, len(a.inline))
	if a.incoming != nil {
		for k, s := range a.incoming.Store(ctx, a.l.imgs, a.tenant) {
			if s.Err != nil {
				return nil, imageError(a.inline[k].Field, s.Err)
			}
			names[a.at[k]] = s.Name
		}
	}
	return names, a.restorePaged(ctx)
}

// restorePaged stores again the page-named images the store no longer has
// (deleted with the last other chat naming them), under the name their
// page gives them when the bytes are that name's.
func (a *appendImages) restorePaged(ctx context.Context) error {
	var gone []images.Inline
	for _, at := range a.paged {
		b := a.msgs[at.msg].Content.Blocks[at.block]
		name := storedName(b)
		_, err := a.l.imgs.Head(ctx, a.tenant, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			field := fmt.Sprintf("messages[%d].content[%d].data", at.msg, at.block)
			gone = append(gone, images.Inline{B64: b.Data, Named: name, Restore: true, Field: field})
		case err != nil && store.IsOutage(err):
			return err
		}
		// Any other failure (S3 may answer a HEAD with 403): the image is
		// treated as stored, as every other reader does.
	}
	if len(gone) == 0 {
		return nil
	}
	incoming, err := prepareImages(ctx, gone)
	if err != nil {
		return err
	}
	for k, s := range incoming.Store(ctx, a.l.imgs, a.tenant) {
		if s.Err != nil {
			return imageError(gone[k].Field, s.Err)
		}
	}
	return nil
}
