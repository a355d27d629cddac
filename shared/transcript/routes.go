package transcript

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// Notifier hears of appended entries; memory implements it to schedule
// their summaries. length is the log's length of the incarnation c as the
// append left it (a later append may have grown it further).
type Notifier interface {
	Appended(ctx context.Context, c chatid.Chat, length int64) error
}

// Routes serves the transcript's HTTP API.
type Routes struct {
	log    *Log
	imgs   *images.Store
	notify Notifier
	held   *api.Held
}

// NewRoutes returns the routes over log and imgs; notify may be nil.
func NewRoutes(log *Log, imgs *images.Store, notify Notifier) *Routes {
	return &Routes{log: log, imgs: imgs, notify: notify}
}

// Holding has an append's body take its room in held before it is read
// (nil holds nothing), and returns rt.
func (rt *Routes) Holding(held *api.Held) *Routes {
	rt.held = held
	return rt
}

// Register adds POST /v1/chats/{chat}/messages and
// GET /v1/chats/{chat}/images/{name}.
func (rt *Routes) Register(mux *http.ServeMux) {
	api.Handle(mux, "POST /v1/chats/{chat}/messages", rt.append)
	api.Handle(mux, "GET /v1/chats/{chat}/images/{name}", rt.image)
}

// AppendRequest is the body of POST /messages.
type AppendRequest struct {
	Messages []pi.Message
	Receipt  string
}

// DecodeAppend reads an append body. Errors name the field at fault by its
// path ("messages[2].content[1].type"). The messages keep slices of data
// (pi.DecodeOwned), which must not change afterwards: a body read whole
// (api.ReadBody) is not copied again.
func DecodeAppend(data []byte) (AppendRequest, error) {
	var raw struct {
		Messages rawjson.Value   `json:"messages"`
		Receipt  json.RawMessage `json:"receipt"`
	}
	if err := api.Unmarshal(data, &raw); err != nil {
		return AppendRequest{}, err
	}
	var receipt string
	if len(raw.Receipt) > 0 && string(raw.Receipt) != "null" {
		if err := json.Unmarshal(raw.Receipt, &receipt); err != nil {
			return AppendRequest{}, api.BadRequest("receipt", "receipt must be a string")
		}
	}
	return DecodeMessages(receipt, raw.Messages)
}

// DecodeMessages is the append of the messages list messages (JSON, as an
// append body's "messages") under receipt; a caller that has the list
// apart from its body (the MCP log tool) decodes it here, with no body
// made for DecodeAppend. As there, the messages keep slices of messages.
func DecodeMessages(receipt string, messages []byte) (AppendRequest, error) {
	if rawjson.Value(messages).IsNull() {
		return AppendRequest{}, api.BadRequest("messages", "messages is required: a list of pi messages")
	}
	var msgs []rawjson.Value
	if err := json.Unmarshal(messages, &msgs); err != nil {
		return AppendRequest{}, api.BadRequest("messages", "messages must be a list of pi messages")
	}
	req := AppendRequest{Receipt: receipt, Messages: make([]pi.Message, len(msgs))}
	for i, m := range msgs {
		var err error
		if req.Messages[i], err = pi.DecodeOwned(m); err != nil {
			return AppendRequest{}, messageError(i, json.RawMessage(m), err)
		}
	}
	return req, nil
}

// messageError names the field of message i that did not decode, down to
// the content block when a block is at fault.
func messageError(i int, m json.RawMessage, err error) error {
	field := fmt.Sprintf("messages[%d]", i)
	fe, ok := errors.AsType[*fault.Error](err)
	if !ok {
		return api.BadRequest(field, "%s must be a pi message object", field)
	}
	if strings.HasPrefix(fe.Field, "content.") {
		var obj struct {
			Content []json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m, &obj) == nil {
			for j, b := range obj.Content {
				var blk pi.Block
				if err := json.Unmarshal(b, &blk); err != nil {
					at := fmt.Sprintf("%s.content[%d]", field, j)
					if bfe, ok := errors.AsType[*fault.Error](err); ok {
						return bfe.Within(at)
					}
					return api.BadRequest(at, "%s must be a content block object", at)
				}
			}
		}
	}
	return fe.Within(field)
}

func (rt *Routes) append(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	release, err := rt.held.Hold(r)
	if err != nil {
		return err
	}
	defer release()
	// Decoded from the body as read, which the messages keep (their
	// decoded texts are its only copies).
	body, err := api.ReadBody(r)
	if err != nil {
		return err
	}
	req, err := DecodeAppend(body)
	if err != nil {
		return err
	}
	ids, err := rt.Append(ctx, tenant, chat, req)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"ids": ids})
	return nil
}

// Append logs an append request's messages in the tenant's chat, as POST
// .../messages does, and tells memory of them.
func (rt *Routes) Append(ctx context.Context, tenant, chat string, req AppendRequest) ([]int64, error) {
	if req.Receipt == "" {
		// Without a receipt a retry cannot be recognised; the append is
		// still all-or-nothing, which the log's receipt record provides.
		req.Receipt = generatedReceipt()
	}
	c, ids, err := rt.log.AppendChat(ctx, tenant, chat, req.Messages, req.Receipt)
	if err != nil {
		return nil, err
	}
	if rt.notify != nil && len(ids) > 0 {
		// The entries are durable; memory finds them on any later call.
		if err := rt.notify.Appended(ctx, c, ids[len(ids)-1]+1); err != nil {
			// The request's logger names the tenant already.
			api.Logger(ctx).Warn("append: notifying memory failed", "chat", chat, "err", err)
		}
	}
	return ids, nil
}

func (rt *Routes) image(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if !refs.ValidName(name) {
		return api.BadRequest("name", "image name %q must be 16 lowercase hex digits", name)
	}
	img, err := rt.log.ChatImage(ctx, tenant, chat, name)
	if errors.Is(err, store.ErrNotFound) {
		return api.NotFound("no image %s", name)
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", img.MimeType)
	h.Set("Content-Length", strconv.Itoa(len(img.Data)))
	// Names are content addresses: the bytes behind one never change, but
	// the chat may stop naming it (a deletion, an erasure), so a cache
	// asks again before each use.
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", `"`+name+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(img.Data)
	}
	return nil
}

// ReceiptOf is the receipt of an append sent without one by a caller that
// may send it again (MCP's log tool, whose host retries a call it got no
// answer to): made of the messages alone, by the digest that tells a
// repeat under a receipt from another request (their JSON, whatever its
// whitespace or key order), as the AI SDK adapter makes its receipts of its
// messages. The same messages sent again are the same append and log
// nothing twice; so are two appends of identical messages, timestamps
// included.
func ReceiptOf(msgs []pi.Message) (string, error) {
	sum, err := requestDigest(msgs)
	if err != nil {
		return "", err
	}
	return "messages/" + sum, nil
}

// generatedReceipt names an append the host sent without a receipt.
func generatedReceipt() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "generated/" + hex.EncodeToString(b[:])
}
