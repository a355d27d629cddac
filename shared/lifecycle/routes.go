package lifecycle

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle/wire"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// The routes' answers, shared with the client.
type (
	ChatInfo     = wire.ChatInfo
	ChatList     = wire.ChatList
	Progress     = wire.Progress
	ImportResult = wire.ImportResult
	Retention    = wire.Retention
)

// LinkTTL is how long a signed image link of a read-back message works.
const LinkTTL = 15 * time.Minute

// Register adds GET /v1/chats, GET /v1/chats/{chat}/messages,
// DELETE /v1/chats/{chat}, GET .../export and POST .../import, and the
// retention settings: GET and PUT
// /v1/retention (the tenant's default) and /v1/chats/{chat}/retention.
func (c *Chats) Register(mux *http.ServeMux) {
	api.Handle(mux, "GET /v1/chats", c.handleList)
	api.Handle(mux, "GET /v1/chats/{chat}/messages", c.handleMessages)
	api.Handle(mux, "DELETE /v1/chats/{chat}", c.handleDelete)
	api.Handle(mux, "GET /v1/chats/{chat}/export", c.handleExport)
	api.Handle(mux, "POST /v1/chats/{chat}/import", c.handleImport)
	api.Handle(mux, "GET /v1/retention", c.handleGetTenantRetention)
	api.Handle(mux, "PUT /v1/retention", c.handlePutTenantRetention)
	api.Handle(mux, "GET /v1/chats/{chat}/retention", c.handleGetChatRetention)
	api.Handle(mux, "PUT /v1/chats/{chat}/retention", c.handlePutChatRetention)
}

// fromSeq reads the after parameter of a route paging by seq: the seq to
// start from, 0 when absent.
func fromSeq(r *http.Request) (int64, error) {
	seq, err := api.QueryInt(r, "after", 0, api.MaxSeq, -1)
	if err != nil {
		return 0, err
	}
	return seq + 1, nil
}

// tenantOf is the caller's tenant, for routes not under a chat.
func tenantOf(r *http.Request) (string, error) {
	tenant := api.Tenant(r.Context())
	if tenant == "" {
		return "", api.Unauthorized("the request has no authenticated tenant")
	}
	return tenant, nil
}

// limit reads the limit parameter: def when absent, at most MaxListLimit.
func limit(r *http.Request, def int) (int, error) {
	n, err := api.QueryInt(r, "limit", 1, MaxListLimit, int64(def))
	return int(n), err
}

// List returns a page of the tenant's chats in id order, after the chat id
// after ("" from the start). It reads the tenant's index and, for each
// chat listed, its log length and memory state: nothing of other tenants.
func (c *Chats) List(ctx context.Context, tenant, after string, n int) (ChatList, error) {
	q := store.Query{PK: IndexPK(tenant), Prefix: indexPrefix, Limit: n}
	if after != "" {
		q.After = indexPrefix + after
	}
	page, err := c.table.Query(ctx, q)
	if err != nil {
		return ChatList{}, fmt.Errorf("lifecycle: listing chats: %w", err)
	}
	out := ChatList{Chats: make([]ChatInfo, 0, len(page.Items))}
	for _, it := range page.Items {
		var e indexEntry
		if err := json.Unmarshal(it.Body, &e); err != nil {
			return ChatList{}, fmt.Errorf("lifecycle: index item %s is corrupt: %w", it.SK, err)
		}
		info := ChatInfo{Chat: strings.TrimPrefix(it.SK, indexPrefix), LastActivity: time.UnixMilli(e.Activity).UTC()}
		if e.Deleting != 0 {
			info.Deleting = &Progress{Removed: e.Removed, Images: e.Images}
		} else {
			if c.log != nil {
				if info.Messages, err = c.log.Len(ctx, tenant, info.Chat); err != nil {
					return ChatList{}, err
				}
			}
			if c.memory != nil {
				if info.Memory, err = c.memory.Glance(ctx, tenant, info.Chat); err != nil {
					return ChatList{}, err
				}
			}
		}
		out.Chats = append(out.Chats, info)
	}
	if page.Next != "" {
		out.Next = strings.TrimPrefix(page.Next, indexPrefix)
	}
	return out, nil
}

func (c *Chats) handleList(w http.ResponseWriter, r *http.Request) error {
	tenant, err := tenantOf(r)
	if err != nil {
		return err
	}
	n, err := limit(r, 50)
	if err != nil {
		return err
	}
	after := r.URL.Query().Get("after")
	if after != "" && !api.ValidChat(after) {
		return api.BadRequest("after", "after must be a chat id from an earlier page's next, not %q", after)
	}
	list, err := c.List(r.Context(), tenant, after, n)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, list)
	return nil
}

// Message is one logged entry read back as a pi message.
type Message struct {
	Seq     int64           `json:"seq"`
	Message json.RawMessage `json:"message"`
}

// MessagePage is a page of a chat's messages.
type MessagePage struct {
	Messages []Message `json:"messages"`
	Next     string    `json:"next"`
}

// Messages returns up to n entries of the chat from seq from, as pi
// messages, and no more than fit PageBudget bytes (at least one). With
// links, each image ref block carries a signed URL. Seqs are entry ids:
// dense and fixed once written, so paging is stable while the chat is
// appended to.
func (c *Chats) Messages(ctx context.Context, tenant, chat string, from int64, n int, links bool) (MessagePage, error) {
	mode := asRefs
	if links {
		mode = asLinks
	}
	out := MessagePage{Messages: []Message{}}
	size := 0
	err := c.eachEntry(ctx, tenant, chat, from, func(e transcript.Entry) (bool, error) {
		if len(out.Messages) == n {
			out.Next = strconv.FormatInt(e.I-1, 10)
			return false, nil
		}
		m, err := c.render(ctx, tenant, e, mode)
		if err != nil {
			return false, err
		}
		if len(out.Messages) > 0 && size+len(m) > PageBudget {
			out.Next = strconv.FormatInt(e.I-1, 10)
			return false, nil
		}
		out.Messages = append(out.Messages, Message{Seq: e.I, Message: m})
		size += len(m)
		return true, nil
	})
	return out, err
}

// PageBudget bounds the bytes of the messages of one page, and of one
// export part (the rest follows from its ExportNextHeader): under
// Lambda's 6 MB answer, with room for JSON's escapes.
const PageBudget = 4 << 20

// readChunk is how many entries are read at once: an entry's text may be
// megabytes, so a page reads a few at a time and stops at its budget.
const readChunk = 8

// eachEntry calls fn with the chat's entries from seq from, in order,
// until fn answers false or the log ends.
func (c *Chats) eachEntry(ctx context.Context, tenant, chat string, from int64, fn func(transcript.Entry) (bool, error)) error {
	for {
		es, err := c.log.Entries(ctx, tenant, chat, from, from+readChunk)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return nil
		}
		for _, e := range es {
			more, err := fn(e)
			if err != nil || !more {
				return err
			}
			from = e.I + 1
		}
	}
}

// block is a content block of a read-back message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Data      string          `json:"data,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	URL       string          `json:"url,omitempty"`
}

// readMessage is the pi message an entry reads back as.
type readMessage struct {
	Role      string          `json:"role"`
	Kind      string          `json:"kind,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	Content   []block         `json:"content"`
	Details   json.RawMessage `json:"details,omitempty"`
	Timestamp int64           `json:"timestamp"`
}

// imageMode says how a read-back message shows an image ref.
type imageMode int

const (
	asRefs   imageMode = iota // the ref, as stored
	asLinks                   // the ref with a signed URL
	asInline                  // an image block with the image's data (export)
)

// refBlock is the block of a text that may be one image ref: a text block
// (with a signed URL as asLinks), or as asInline an image block carrying
// the stored image and its name. A text that is no ref, or names an image
// no longer stored, stays a text block.
func (c *Chats) refBlock(ctx context.Context, tenant, text string, mode imageMode) (block, error) {
	b := block{Type: "text", Text: text}
	name := refs.RefName(text)
	if name == "" {
		return b, nil
	}
	switch mode {
	case asLinks:
		if c.linker != nil {
			u, err := c.linker.URL(ctx, store.ImageKey(tenant, name), LinkTTL)
			if err != nil {
				return block{}, err
			}
			b.URL = u
		}
	case asInline:
		img, err := images.New(c.blobs).Get(ctx, tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			return b, nil
		}
		if err != nil {
			return block{}, err
		}
		return block{Type: "image", Name: name, MimeType: img.MimeType, Data: base64.StdEncoding.EncodeToString(img.Data)}, nil
	}
	return b, nil
}

// render turns an entry into the pi message it was logged from: users'
// words and notes as user messages, assistant text and tool calls as
// assistant messages, tool results as toolResult messages. A line that is
// an image ref becomes a ref block of its own: a text block whose whole
// text is the ref, as stored; with links it also carries the image's
// signed URL ("url").
func (c *Chats) render(ctx context.Context, tenant string, e transcript.Entry, mode imageMode) (json.RawMessage, error) {
	m := readMessage{Timestamp: e.Date.UnixMilli()}
	text := e.Text
	switch e.Kind {
	case transcript.KindUser:
		m.Role = "user"
	case transcript.KindWork, transcript.KindNote:
		m.Role, m.Kind = "user", e.Kind
	case transcript.KindTalk:
		// One entry per assistant block: its text, or one image's ref.
		m.Role = "assistant"
		b, err := c.refBlock(ctx, tenant, text, mode)
		if err != nil {
			return nil, err
		}
		m.Content = []block{b}
		return api.Marshal(m)
	case transcript.KindTool:
		m.Role = "assistant"
		name, args, _ := strings.Cut(text, " ")
		b := block{Type: "toolCall", Name: name}
		if json.Valid([]byte(args)) {
			b.Arguments = json.RawMessage(args)
		}
		m.Content = []block{b}
		return api.Marshal(m)
	case transcript.KindEcho:
		m.Role = "toolResult"
		name, rest, _ := strings.Cut(text, ": ")
		m.ToolName, text = name, rest
		if e.Tool == transcript.ToolZoom && e.Of >= 0 {
			// Where a logged zoom result pointed, as its details said.
			m.Details = json.RawMessage(`{"id":` + strconv.FormatInt(e.Of, 10) + `}`)
		}
	default:
		m.Role, m.Kind = "user", e.Kind
	}
	var para []string
	flush := func() {
		if len(para) > 0 {
			m.Content = append(m.Content, block{Type: "text", Text: strings.Join(para, "\n")})
			para = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if refs.RefName(line) == "" {
			para = append(para, line)
			continue
		}
		flush()
		b, err := c.refBlock(ctx, tenant, line, mode)
		if err != nil {
			return nil, err
		}
		m.Content = append(m.Content, b)
	}
	flush()
	if m.Content == nil {
		m.Content = []block{}
	}
	return api.Marshal(m)
}

func (c *Chats) handleMessages(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	n, err := limit(r, 100)
	if err != nil {
		return err
	}
	from, err := fromSeq(r)
	if err != nil {
		return err
	}
	links := false
	switch v := q.Get("images"); v {
	case "":
	case "links":
		links = true
	default:
		return api.BadRequest("images", "images must be \"links\" or absent, not %q", v)
	}
	page, err := c.Messages(r.Context(), tenant, chat, from, n, links)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, page)
	return nil
}

// DeleteAnswer is the answer of DELETE /v1/chats/{chat}.
type DeleteAnswer struct {
	Chat     string   `json:"chat"`
	Deleted  bool     `json:"deleted"`
	Progress Progress `json:"progress"`
}

func (c *Chats) handleDelete(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	p, err := c.Delete(ctx, tenant, chat, 0)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if !p.Done {
		if c.queue == nil {
			// Nothing to hand the rest to: the call runs to the end.
			for !p.Done && err == nil {
				p, err = c.Delete(ctx, tenant, chat, 0)
			}
			if err != nil {
				return err
			}
		} else {
			if err := c.queue.Send(ctx, deleteBody(tenant, chat), 0); err != nil {
				return fmt.Errorf("lifecycle: queueing the rest of the deletion of %s: %w", chat, err)
			}
			code = http.StatusAccepted
		}
	}
	api.WriteJSON(w, code, DeleteAnswer{Chat: chat, Deleted: p.Done, Progress: p})
	return nil
}

// deleteMessage is the queue message that continues a deletion, or
// (op "expire") a retention sweep from the tenant after.
type deleteMessage struct {
	Op     string `json:"op"`
	Tenant string `json:"tenant,omitempty"`
	Chat   string `json:"chat,omitempty"`
	After  string `json:"after,omitempty"`
}

const (
	opDelete = "delete"
	opExpire = "expire"
)

func deleteBody(tenant, chat string) string {
	b, _ := json.Marshal(deleteMessage{Op: opDelete, Tenant: tenant, Chat: chat})
	return string(b)
}

// Task is memory.Tasks: it runs the next steps of a deletion, or of a
// retention sweep, named by a queue message, and queues the rest again
// when there is more.
func (c *Chats) Task(ctx context.Context, body string) (bool, error) {
	var msg deleteMessage
	if json.Unmarshal([]byte(body), &msg) != nil {
		return false, nil
	}
	if msg.Op == opExpire {
		next, _, err := c.Expire(ctx, msg.After)
		if err != nil {
			return true, err
		}
		if next != "" && c.queue != nil {
			b, _ := json.Marshal(deleteMessage{Op: opExpire, After: next})
			return true, c.queue.Send(ctx, string(b), 0)
		}
		return true, nil
	}
	if msg.Op != opDelete {
		return false, nil
	}
	if msg.Chat == "" {
		return true, nil // names nothing: dropped
	}
	p, err := c.Delete(ctx, msg.Tenant, msg.Chat, 0)
	if err != nil {
		return true, err
	}
	if !p.Done {
		if c.queue == nil {
			return true, errors.New("lifecycle: deletion continues but there is no queue")
		}
		if err := c.queue.Send(ctx, body, 0); err != nil {
			return true, err
		}
	}
	return true, nil
}
