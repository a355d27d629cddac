package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// The routes' answers, shared with the client.
type (
	ChatInfo     = wire.ChatInfo
	ChatList     = wire.ChatList
	Progress     = wire.DeleteProgress
	ImportResult = wire.ImportResult
	Retention    = wire.Retention
)

// LinkTTL is how long a signed image link of a read-back message works.
const LinkTTL = 15 * time.Minute

// Register adds GET /v1/chats, GET /v1/chats/{chat}/messages,
// DELETE /v1/chats/{chat}, POST .../erase and GET .../erasures/{id},
// GET .../export and POST .../import, and the
// retention settings: GET and PUT
// /v1/retention (the tenant's default) and /v1/chats/{chat}/retention.
func (c *Routes) Register(mux *http.ServeMux) {
	api.Handle(mux, "GET /v1/chats", c.handleList)
	api.Handle(mux, "GET /v1/chats/{chat}/messages", c.handleMessages)
	api.Handle(mux, "DELETE /v1/chats/{chat}", c.handleDelete)
	api.Handle(mux, "POST /v1/chats/{chat}/erase", c.handleErase)
	api.Handle(mux, "GET /v1/chats/{chat}/erasures/{id}", c.handleErasure)
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
// after ("" from the start). It reads a page of the tenant's index, the
// listed chats' identity items in one batch and, for each, its log length
// and memory state: nothing of other tenants.
func (c *Routes) List(ctx context.Context, tenant, after string, n int) (ChatList, error) {
	q := store.Query{PK: store.IndexPK(tenant), Prefix: store.IndexChatPrefix, Limit: n}
	if after != "" {
		q.After = store.IndexChatSK(after)
	}
	page, err := c.table.Query(ctx, q)
	if err != nil {
		return ChatList{}, fmt.Errorf("lifecycle: listing chats: %w", err)
	}
	chats, err := c.readListed(ctx, tenant, page.Items)
	if err != nil {
		return ChatList{}, err
	}
	out := ChatList{Chats: make([]ChatInfo, 0, len(chats))}
	for _, l := range chats {
		info := ChatInfo{Chat: l.chat, LastActivity: time.UnixMilli(l.state.Activity).UTC()}
		if l.state.Deleting != 0 {
			info.Deleting = &Progress{Removed: l.state.Removed, Images: l.state.Images}
		} else {
			ch := l.id.Chat
			if info.Messages, err = c.log.Len(ctx, ch); err != nil {
				return ChatList{}, err
			}
			if c.memory != nil {
				if info.Memory, err = c.memory.Glance(ctx, ch); err != nil {
					return ChatList{}, err
				}
			}
		}
		out.Chats = append(out.Chats, info)
	}
	if page.Next != "" {
		out.Next = strings.TrimPrefix(page.Next, store.IndexChatPrefix)
	}
	return out, nil
}

func (c *Routes) handleList(w http.ResponseWriter, r *http.Request) error {
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

func (c *Routes) handleMessages(w http.ResponseWriter, r *http.Request) error {
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
	var mode ImageMode
	switch v := q.Get("images"); v {
	case "":
		mode = ImagesAsRefs
	case "links":
		mode = ImagesAsLinks
	case "inline":
		mode = ImagesInline
	default:
		return api.BadRequest("images", "images must be \"links\", \"inline\" or absent, not %q", v)
	}
	page, err := c.Messages(r.Context(), tenant, chat, MessageQuery{From: from, N: n, Images: mode})
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
	ch, p, _, err := c.deleteIf(ctx, tenant, chat, 0, nil)
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
			if err := c.queue.Send(ctx, tasks.For(tasks.Delete, ch).Body(), 0); err != nil {
				return fmt.Errorf("lifecycle: queueing the rest of the deletion of %s: %w", chat, err)
			}
			code = http.StatusAccepted
		}
	}
	api.WriteJSON(w, code, DeleteAnswer{Chat: chat, Deleted: p.Done, Progress: p})
	return nil
}

// The lifecycle's queue tasks (the handlers of tasks.Delete, tasks.Settle
// and tasks.Expire) run the next steps of a deletion, the sweep after one,
// or a step of a retention sweep, and queue the rest again when there is
// more.

// SweepTask is the handler of tasks.Expire: it runs the step of a
// retention sweep that msg names and queues the message of the step after
// it.
func (c *Chats) SweepTask(ctx context.Context, msg tasks.Message) error {
	// A message without a run is the hourly trigger (or one of a sweep
	// sent before sweeps had runs, which starts one the same).
	var step SweepStep
	var err error
	if msg.Run == "" {
		step, err = c.StartSweep(ctx)
	} else {
		step, err = c.SweepStep(ctx, msg.Run, msg.Seq)
	}
	if err != nil {
		return err
	}
	if step.Busy {
		// Asked again after the queue's delay: by then the copy has
		// finished the step, or is taken to have died.
		return store.Unavailable("lifecycle sweep", fmt.Errorf("step %d of sweep %s is running elsewhere", step.Seq, step.Run))
	}
	if !step.Ran || step.Done {
		return nil
	}
	next := tasks.Message{Kind: tasks.Expire, Run: step.Run, Seq: step.Seq + 1}
	return c.queueRest(ctx, "the sweep", next.Body())
}

// queueRest queues body, the message of the rest of a task (what it is
// called in the error when there is no queue to carry it).
func (c *Chats) queueRest(ctx context.Context, what, body string) error {
	if c.queue == nil {
		return fmt.Errorf("lifecycle: %s continues but there is no queue", what)
	}
	return c.queue.Send(ctx, body, 0)
}

// DeletionTask is the handler of tasks.Delete: it runs the next steps of
// the deletion msg names and, when there is more, queues the same message
// again.
func (c *Chats) DeletionTask(ctx context.Context, msg tasks.Message) error {
	if !msg.NamesChat() {
		return nil // names nothing: dropped
	}
	p, err := c.continueDeletion(ctx, msg.ChatID())
	if err != nil || p.Done {
		return err
	}
	return c.queueRest(ctx, "deletion", tasks.For(tasks.Delete, msg.ChatID()).Body())
}

// SettleTask is the handler of tasks.Settle: it sweeps the incarnation msg
// names, retired by its deletion,
// once more: whatever a writer that had found it current wrote after the
// deletion's last page goes as the deletion's items went (an image it
// named is deleted when no other chat names it). While the id still names
// the incarnation, its deletion did not finish; the finish that does
// queues a sweep of its own, so this one does nothing. When more is left
// than one call removes, it queues itself again.
func (c *Chats) SettleTask(ctx context.Context, msg tasks.Message) error {
	if !msg.NamesChat() {
		return nil // names nothing: dropped
	}
	ch := msg.ChatID()
	if cur, recorded, err := c.ids.Current(ctx, ch.Tenant, ch.ID); err != nil || (recorded && cur == ch) {
		return err
	}
	var p Progress
	more, err := c.sweep(ctx, ch, c.steps, &p)
	if p.Removed > 0 {
		err = errors.Join(err, c.Scrub(ctx))
	}
	if err != nil || !more {
		return err
	}
	return c.queueRest(ctx, "the sweep after a deletion", tasks.For(tasks.Settle, ch).Body())
}

// continueDeletion runs the next steps of the deletion of the incarnation
// ch that a queue message names. A message delivered after that deletion
// finished (again, or late) finds the chat's state no longer marking it
// deleting, or the id naming another incarnation, and deletes nothing:
// the chat the id names now is another one.
func (c *Chats) continueDeletion(ctx context.Context, ch chatid.Chat) (Progress, error) {
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil {
		return Progress{}, err
	}
	if r.state.Deleting == 0 {
		return Progress{Done: true}, nil
	}
	if r.id.Recorded && r.id.Chat != ch {
		return Progress{Done: true}, nil
	}
	return c.run(ctx, ch, 0, r.state)
}
