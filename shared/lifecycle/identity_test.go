package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/store"
)

// quoting is a compactor whose line quotes the start of its source, as the
// offline model's extract does: a line shows which message it came from.
type quoting struct{}

func (quoting) Compact(_ context.Context, c memory.CompactRequest) (memory.Compacted, error) {
	src := c.Source
	if len(src) > 120 {
		src = src[:120]
	}
	return memory.Compacted{Line: "summary of " + src, Attempts: 1, Model: "quoting"}, nil
}

// build runs every queue message through the env's memory as the compact
// function does (an SQS batch), until the queue is empty, and returns the
// bodies it ran.
func (e *env) build() []string {
	e.t.Helper()
	ctx := e.t.Context()
	var bodies []string
	for range 100 {
		ds, err := e.b.Receiver.Receive(ctx, 10, time.Minute, time.Second)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ds) == 0 {
			return bodies
		}
		keep := e.consumer.HandleBatch(ctx, ds)
		for _, d := range ds {
			bodies = append(bodies, d.Body)
			if slices.Contains(keep, d.ID) {
				e.t.Fatalf("build message %s failed", d.Body)
			}
			if err := e.b.Receiver.Ack(ctx, d.Receipt); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	e.t.Fatal("the queue did not drain")
	return nil
}

// redeliver hands bodies to the env's memory as one SQS batch, as the
// compact function receives a message again (or late).
func (e *env) redeliver(bodies []string) {
	e.t.Helper()
	ds := make([]store.Delivery, len(bodies))
	for i, b := range bodies {
		ds[i] = store.Delivery{ID: fmt.Sprint("again-", i), Body: b, Receives: 2}
	}
	if keep := e.consumer.HandleBatch(e.t.Context(), ds); len(keep) != 0 {
		e.t.Fatalf("redelivered messages %v failed", keep)
	}
}

// items is every item of the chat: its home partition and the partitions
// of the incarnations given, as "pk sk v body".
func (e *env) items(incs ...chatid.Chat) []string {
	e.t.Helper()
	var out []string
	pks := []string{store.ChatPK(incs[0].Tenant, incs[0].ID)}
	for _, c := range incs {
		if c.PK() != pks[0] {
			pks = append(pks, c.PK())
		}
	}
	for _, pk := range pks {
		for _, it := range e.itemsOf(pk) {
			out = append(out, fmt.Sprintf("%s %s %d %s", pk, it.SK, it.Version, it.Body))
		}
	}
	return out
}

// itemsOf is every item of the partition pk, in sort key order.
func (e *env) itemsOf(pk string) []store.Item {
	e.t.Helper()
	var out []store.Item
	after := ""
	for {
		page, err := e.b.Table.Query(e.t.Context(), store.Query{PK: pk, After: after, Limit: 100})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

// tool calls a memory tool and returns its text.
func (e *env) tool(tenant, chat, name string, args any) string {
	e.t.Helper()
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/tools/"+name, args)
	if code != http.StatusOK {
		e.t.Fatalf("%s on %s: %d %s", name, chat, code, body)
	}
	return string(body)
}

// get reads a route of the chat and returns its body.
func (e *env) get(tenant, chat, route string) string {
	e.t.Helper()
	code, body := e.do(tenant, "GET", "/v1/chats/"+chat+"/"+route, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s of %s: %d %s", route, chat, code, body)
	}
	return string(body)
}

// everything is what the chat shows through every route that reads it:
// view, zoom, date, search, status, tree, read-back (the memory browser
// reads the same routes).
func (e *env) everything(tenant, chat, find string) map[string]string {
	e.t.Helper()
	return map[string]string{
		"view":      e.get(tenant, chat, "view"),
		"zoom":      e.tool(tenant, chat, "zoom", map[string]any{"id": 0}),
		"zoom pair": e.tool(tenant, chat, "zoom", map[string]any{"id": 0, "n": 2}),
		"date":      e.tool(tenant, chat, "date", map[string]any{"id": 0}),
		"search":    e.tool(tenant, chat, "search", map[string]any{"text": find}),
		"status":    e.get(tenant, chat, "status"),
		"tree":      e.get(tenant, chat, "tree?level=0"),
		"tree top":  e.get(tenant, chat, "tree"),
		"read-back": e.get(tenant, chat, "messages"),
	}
}

// longUser is a user message long enough that its summary line is the
// compactor's, dated at ms.
func longUser(text string, ms int64) map[string]any {
	return map[string]any{"role": "user", "timestamp": ms, "content": text + " " + strings.Repeat("and more words that need a summary ", 40)}
}

// A chat deleted and created again under its id is a new chat in every
// process: neither the process that served the deleted one (its line
// cache warm) nor a second process shows anything of it through any
// route, and its build messages delivered after the new chat exists write
// nothing.
func TestADeletedChatsIdNamesOnlyTheNewChatInEveryProcess(t *testing.T) {
	t.Parallel()
	const (
		oldDate = 1_700_000_000_000 // 2023-11-14
		newDate = 1_800_000_000_000 // 2027-01-15
	)
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			a := newEnvBuilding(t, b, 0, nil, quoting{}) // serves the old chat
			other := newEnvBuilding(t, b, 0, nil, quoting{})

			a.append("alice", "x", longUser("OLD-SECRET the launch code is 4242", oldDate), longUser("OLD-SECRET second", oldDate))
			oldBuilds := a.build()
			if len(oldBuilds) < 3 {
				t.Fatalf("built %d messages, want two leaves and their merge", len(oldBuilds))
			}
			old := a.current("alice", "x")
			// Both processes read the old chat: their caches hold its lines.
			for _, e := range []*env{a, other} {
				if v := e.get("alice", "x", "view"); !strings.Contains(v, "OLD-SECRET") {
					t.Fatalf("the old chat's view = %s, want its lines", v)
				}
				e.everything("alice", "x", "OLD-SECRET")
			}

			if code, d := a.delete("alice", "x"); code != http.StatusOK || !d.Deleted {
				t.Fatalf("delete = %d %+v", code, d)
			}
			a.append("alice", "x", longUser("NEW-MESSAGE hello", newDate), longUser("NEW-MESSAGE again", newDate))
			now := a.current("alice", "x")
			if now == old {
				t.Fatalf("the new chat is incarnation %q, the deleted one's", now.Inc)
			}

			// The old chat's build messages come back before the new
			// chat's run: they build nothing of it, and write nothing
			// anywhere.
			before := a.items(old, now)
			a.redeliver(oldBuilds)
			other.redeliver(oldBuilds)
			if after := a.items(old, now); !slices.Equal(before, after) {
				t.Fatalf("the deleted chat's build messages wrote:\nbefore %q\nafter  %q", before, after)
			}

			other.build()
			for _, e := range []*env{a, other} {
				for route, body := range e.everything("alice", "x", "MESSAGE") {
					if strings.Contains(body, "OLD-SECRET") || strings.Contains(body, "2023-11-14") {
						t.Errorf("%s shows the deleted chat: %s", route, body)
					}
				}
				got := e.everything("alice", "x", "OLD-SECRET")
				for _, route := range []string{"view", "zoom", "zoom pair", "tree", "tree top", "read-back"} {
					if !strings.Contains(got[route], "NEW-MESSAGE") {
						t.Errorf("%s = %s, want the new chat's message", route, got[route])
					}
				}
				if !strings.Contains(got["date"], "2027-01-15") {
					t.Errorf("date = %s, want the new message's", got["date"])
				}
				if !strings.Contains(got["search"], "no original entry") {
					t.Errorf("search for the deleted chat's words = %s, want no hit", got["search"])
				}
				var st struct{ Entries, Built int64 }
				if err := json.Unmarshal([]byte(got["status"]), &st); err != nil || st.Entries != 2 || st.Built != 3 {
					t.Errorf("status = %s, want the new chat's 2 entries and 3 nodes built", got["status"])
				}
			}
			if left := a.items(old); len(left) > 1 {
				t.Errorf("the deleted incarnation's partition holds %q", left[1:])
			}
		})
	}
}

// A chat id deleted and used again never shows the deleted chat's view
// snapshot: two processes that both read the old chat's view (so both
// know its snapshot and hold its lines) and a new process read the new
// chat's view, which holds none of the old lines; the old snapshot is
// gone with its incarnation's partition and the new chat keeps its own.
func TestAReusedChatIdNeverShowsTheDeletedChatsViewSnapshot(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			a := newEnvBuilding(t, b, 0, nil, quoting{})
			other := newEnvBuilding(t, b, 0, nil, quoting{})
			// Enough messages that a view keeps a snapshot of their lines.
			say := func(word string) chatid.Chat {
				var msgs []map[string]any
				for i := range 40 {
					msgs = append(msgs, user(fmt.Sprintf("%s message %d", word, i)))
				}
				a.append("alice", "x", msgs...)
				a.build()
				return a.current("alice", "x")
			}
			snapshot := func(c chatid.Chat) bool {
				return slices.ContainsFunc(a.itemsOf(c.PK()), func(it store.Item) bool { return it.SK == store.ViewSK })
			}

			old := say("OLD-SECRET")
			for _, e := range []*env{a, other} {
				if v := e.get("alice", "x", "view"); strings.Count(v, "OLD-SECRET") != 40 {
					t.Fatalf("the old chat's view = %s, want its 40 lines", v)
				}
			}
			if !snapshot(old) {
				t.Fatal("the old chat keeps no view snapshot: the test holds less than it says")
			}

			if code, _ := a.delete("alice", "x"); code == http.StatusAccepted {
				a.drain()
			}
			now := say("NEW-MESSAGE")
			if now == old {
				t.Fatalf("the new chat is incarnation %q, the deleted one's", now.Inc)
			}
			if left := a.itemsOf(old.PK()); len(left) != 0 {
				t.Fatalf("the deleted incarnation's partition holds %d items", len(left))
			}
			for i, e := range []*env{a, other, newEnvBuilding(t, b, 0, nil, quoting{})} {
				// The first view of the new chat writes its snapshot, the
				// next reads it.
				for range 2 {
					if v := e.get("alice", "x", "view"); strings.Contains(v, "OLD-SECRET") || strings.Count(v, "NEW-MESSAGE") != 40 {
						t.Fatalf("process %d: the new chat's view = %s, want its own 40 lines", i, v)
					}
				}
			}
			if !snapshot(now) {
				t.Fatal("the new chat keeps no view snapshot")
			}
		})
	}
}

// A deletion's queue message delivered again after the id names a new
// chat deletes nothing of it.
func TestADeletionsMessageDeliveredAfterTheIdIsReusedDeletesNothing(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 1) // one step of StepItems per call
			var msgs []map[string]any
			for i := range lifecycle.StepItems + 10 {
				msgs = append(msgs, user(fmt.Sprint("old ", i)))
			}
			e.append("alice", "x", msgs...)
			if code, d := e.delete("alice", "x"); code != http.StatusAccepted || d.Deleted {
				t.Fatalf("delete = %d %+v, want 202 with the rest queued", code, d)
			}
			ctx := t.Context()
			var continued, receipt string // the deletion's next step; the rest are builds
			for continued == "" {
				ds, err := e.b.Receiver.Receive(ctx, 10, time.Minute, time.Second)
				if err != nil || len(ds) == 0 {
					t.Fatalf("no deletion message queued (%v)", err)
				}
				for _, d := range ds {
					if strings.Contains(d.Body, `"kind":"delete"`) {
						continued, receipt = d.Body, d.Receipt
					} else if err := e.b.Receiver.Ack(ctx, d.Receipt); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := e.tasks.Route(ctx, continued); err != nil {
				t.Fatal(err)
			}
			if err := e.b.Receiver.Ack(ctx, receipt); err != nil {
				t.Fatal(err)
			}
			e.drain()
			if l := e.list("alice", ""); len(l.Chats) != 0 {
				t.Fatalf("list after the deletion = %+v", l)
			}

			e.append("alice", "x", user("new"))
			for range 3 {
				if _, err := e.tasks.Route(ctx, continued); err != nil {
					t.Fatalf("Task = %v", err)
				}
			}
			e.drain()
			if p := e.messages("alice", "x", ""); len(p.Messages) != 1 || !strings.Contains(string(p.Messages[0].Message), "new") {
				t.Fatalf("the new chat reads %+v after the old deletion's message came again, want its message", p)
			}
			if l := e.list("alice", ""); len(l.Chats) != 1 || l.Chats[0].Deleting != nil {
				t.Fatalf("list = %+v, want the new chat, not being deleted", l)
			}
		})
	}
}

// A chat written before incarnations were recorded (its rows in the home
// partition, no identity item) reads as it did, takes appends in place,
// and is deleted whole; its id then opens a new incarnation.
func TestAChatWrittenBeforeIncarnationsKeepsReadingAndIsDeletedWhole(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnvBuilding(t, b, 0, nil, quoting{})
			e.append("alice", "x", longUser("first, before incarnations", 1_700_000_000_000), user("second"))
			e.build()
			// Move it to the layout written before: every item in the home
			// partition, no identity item.
			ctx := t.Context()
			cur := e.current("alice", "x")
			home := chatid.Chat{Tenant: "alice", ID: "x"}
			page, err := b.Table.Query(ctx, store.Query{PK: cur.PK()})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				moved := store.Item{Key: store.Key{PK: home.PK(), SK: it.SK}, Body: it.Body, Expires: it.Expires}
				if err := b.Table.Create(ctx, moved); err != nil {
					t.Fatal(err)
				}
				if err := b.Table.Delete(ctx, it.Key, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Table.Delete(ctx, chatid.Home("alice", "x"), 0); err != nil {
				t.Fatal(err)
			}
			fresh := newEnvBuilding(t, b, 0, nil, quoting{}) // a process that never saw it
			if got := fresh.current("alice", "x"); got != home {
				t.Fatalf("current = %+v, want incarnation \"\"", got)
			}
			view := fresh.get("alice", "x", "view")
			if !strings.Contains(view, "summary of user: first, before incarnations") || !strings.Contains(view, "second") {
				t.Fatalf("the old chat's view = %s, want its lines", view)
			}
			if p := fresh.messages("alice", "x", ""); len(p.Messages) != 2 {
				t.Fatalf("read back %d messages, want 2", len(p.Messages))
			}

			if ids := fresh.append("alice", "x", user("third")); len(ids) != 1 || ids[0] != 2 {
				t.Fatalf("append to the old chat = %v, want id 2", ids)
			}
			if got := fresh.current("alice", "x"); got != home {
				t.Fatalf("after an append current = %+v, want incarnation \"\" still", got)
			}
			fresh.build()
			if v := fresh.get("alice", "x", "view"); !strings.Contains(v, "third") {
				t.Fatalf("view = %s, want the appended line", v)
			}

			if code, d := fresh.delete("alice", "x"); code != http.StatusOK || !d.Deleted {
				t.Fatalf("delete = %d %+v", code, d)
			}
			if left := fresh.items(home); len(left) != 0 {
				t.Fatalf("left after deleting the old chat: %q", left)
			}
			fresh.append("alice", "x", user("anew"))
			if got := fresh.current("alice", "x"); got.Inc == "" {
				t.Fatal("the id reused after deleting an old chat opened no incarnation")
			}
			fresh.build()
			if v := fresh.get("alice", "x", "view"); strings.Contains(v, "first") || !strings.Contains(v, "anew") {
				t.Fatalf("the new chat's view = %s", v)
			}
		})
	}
}
