package transcript

import (
	"context"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
)

// storeMissing deals with the images an append names that the store no
// longer has once the append's references are recorded (Chats.Appending
// reports them): deleted with another chat before this append could hold
// them. Every image block showing one is stored again, a zoom result's
// under the name its page gives it (even one the page names, which the
// append does not store otherwise). A ref block naming one that no block
// stores again is refused, as it would have been had the deletion come
// first: an append never answers naming an image that is gone. A name
// only mentioned in a text is not checked by any append, here neither.
func (l *Log) storeMissing(ctx context.Context, tenant string, msgs []pi.Message, missing []string) error {
	gone := make(map[string]bool, len(missing))
	for _, name := range missing {
		gone[name] = true
	}
	field := func(r imageRef) string { return fmt.Sprintf("messages[%d].content[%d]", r.msg, r.block) }
	var inline []images.Inline
	for i, m := range msgs {
		for j, b := range m.Content.Blocks {
			if b.Type != pi.TypeImage {
				continue
			}
			data := field(imageRef{i, j}) + ".data"
			switch {
			case gone[storedName(b)]:
				inline = append(inline, images.Inline{B64: b.Data, Named: b.Name, Restore: true, Field: data})
			case refs.ValidName(b.Name) && gone[images.Name(b.Data)]:
				// Stored under its own name when the one it carried was not.
				inline = append(inline, images.Inline{B64: b.Data, Field: data})
			}
		}
	}
	stored := map[string]bool{}
	if len(inline) > 0 {
		incoming, err := images.Prepare(ctx, inline)
		if refused, ok := errors.AsType[*fault.Error](err); ok {
			return imageError(refused.Field, refused.Err)
		}
		if err != nil {
			return err
		}
		for k, s := range incoming.Store(ctx, l.imgs, tenant) {
			if s.Err != nil {
				return imageError(inline[k].Field, s.Err)
			}
			stored[s.Name] = true
		}
	}
	for i, m := range msgs {
		if m.Role != pi.RoleUser && m.Role != pi.RoleToolResult {
			continue // claimRefs checks no ref of an assistant's either
		}
		named := zoomPageNames(m)
		for j, b := range m.Content.Blocks {
			if b.Type != pi.TypeText {
				continue
			}
			if name := refs.RefName(b.Text); name != "" && !named[name] && gone[name] && !stored[name] {
				return inputErr(field(imageRef{i, j}), "does not name a stored image: it was deleted (with the last other chat naming it) while this append was under way")
			}
		}
	}
	return nil
}
