package lifecycle_test

import (
	"encoding/json"
	"image/color"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// tenantKeyCount counts the calls a table is asked that touch a partition
// every chat of a tenant shares (the chat index and settings, chats/...):
// reads and writes apart.
type tenantKeyCount struct {
	reads, writes atomic.Int64
}

func (n *tenantKeyCount) wrap(t store.Table) store.Table {
	shared := func(k store.Key) bool { return strings.HasPrefix(k.PK, "chats/") }
	read := func(k store.Key) error {
		if shared(k) {
			n.reads.Add(1)
		}
		return nil
	}
	write := func(k store.Key) error {
		if shared(k) {
			n.writes.Add(1)
		}
		return nil
	}
	return &testenv.FailingTable{Table: t, FailGet: read, FailCreate: write, FailUpdate: write, FailDelete: write,
		FailQuery: func(q store.Query) error { return read(store.Key{PK: q.PK}) },
		FailBatchGet: func(keys []store.Key) error {
			for _, k := range keys {
				_ = read(k)
			}
			return nil
		}}
}

// Appends read and write only their chat's own partitions: the check that
// the chat is not being deleted is its identity item, and its activity is
// kept there, so a tenant's chats share no key on the append path. Only a
// chat's first append lists it in the tenant's index, once.
func TestAnAppendTouchesNoKeyItsTenantsOtherChatsShare(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			var n tenantKeyCount
			b.Table = n.wrap(b.Table)
			e := newEnvAt(t, b, 0, func() time.Time { return time.UnixMilli(clock.Load()) })
			shot := pngB64(t, color.RGBA{7, 7, 7, 255})
			chats := []string{"a", "b", "c"}
			for _, chat := range chats {
				before := n.writes.Load()
				e.append("alice", chat, user("first"))
				if w := n.writes.Load() - before; w != 1 {
					t.Errorf("chat %s's first append wrote %d items of the tenant's partition, want its one index item", chat, w)
				}
			}
			n.reads.Store(0)
			n.writes.Store(0)
			const appends = 20
			for i := range appends {
				clock.Add((30 * time.Second).Milliseconds()) // an activity write every other append
				for _, chat := range chats {
					if i%5 == 0 {
						e.append("alice", chat, withImage("look", shot))
					} else {
						e.append("alice", chat, user("more"))
					}
				}
			}
			if r, w := n.reads.Load(), n.writes.Load(); r != 0 || w != 0 {
				t.Fatalf("%d appends read %d and wrote %d items of the tenant's partition, want none", appends*len(chats), r, w)
			}
			// And what the tenant reads of them is as it was.
			l := e.list("alice", "")
			if len(l.Chats) != len(chats) {
				t.Fatalf("listed %+v", l)
			}
			for _, c := range l.Chats {
				if want := time.UnixMilli(clock.Load() - (30 * time.Second).Milliseconds()); c.LastActivity.Before(want) || c.Messages != appends+1 {
					t.Errorf("chat %s listed with activity %v (want at least %v) and %d messages", c.Chat, c.LastActivity, want, c.Messages)
				}
			}
		})
	}
}

// legacyLayout moves the chat back to the layout written before its state
// moved to its identity item: the identity item names only the
// incarnation, and the index item holds body.
func legacyLayout(t *testing.T, table store.Table, tenant, chat string, body map[string]any) {
	t.Helper()
	ctx := t.Context()
	home := chatid.Home(tenant, chat)
	it, err := table.Get(ctx, home)
	if err != nil {
		t.Fatal(err)
	}
	var id map[string]json.RawMessage
	if err := json.Unmarshal(it.Body, &id); err != nil || id["s"] == nil {
		t.Fatalf("identity item %s holds no state", it.Body)
	}
	old, _ := json.Marshal(map[string]json.RawMessage{"n": id["n"]})
	if err := table.Update(ctx, store.Item{Key: home, Body: old, Version: it.Version + 1}); err != nil {
		t.Fatal(err)
	}
	k := store.Key{PK: store.IndexPK(tenant), SK: store.IndexChatSK(chat)}
	idx, err := table.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	if err := table.Update(ctx, store.Item{Key: k, Body: raw, Version: idx.Version + 1}); err != nil {
		t.Fatal(err)
	}
}

// A chat last written before the state moved keeps its activity, its own
// retention and its deletion's mark as its index item holds them: it is
// listed and swept by them, refused while being deleted and finished by its
// deletion's message, and its next change moves the state, after which its
// appends no longer read the index.
func TestAChatWrittenBeforeTheStateMovedKeepsItsActivityRetentionAndDeletion(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			var n tenantKeyCount
			table := b.Table
			b.Table = n.wrap(b.Table)
			e := newEnvAt(t, b, 0, func() time.Time { return time.UnixMilli(clock.Load()) })
			for _, chat := range []string{"idle", "deleting", "active"} {
				e.append("alice", chat, user("hello "+chat))
			}
			long := clock.Load() - (10 * 24 * time.Hour).Milliseconds()
			legacyLayout(t, table, "alice", "idle", map[string]any{"a": long, "rd": 5})
			legacyLayout(t, table, "alice", "deleting", map[string]any{"a": long, "x": clock.Load(), "dn": 1})
			legacyLayout(t, table, "alice", "active", map[string]any{"a": long})

			got := map[string]string{}
			for _, c := range e.list("alice", "").Chats {
				got[c.Chat] = c.LastActivity.Format(time.RFC3339)
				if (c.Deleting != nil) != (c.Chat == "deleting") {
					t.Errorf("chat %s listed deleting=%v", c.Chat, c.Deleting != nil)
				}
			}
			if want := time.UnixMilli(long).UTC().Format(time.RFC3339); got["idle"] != want || got["active"] != want {
				t.Fatalf("listed activity %v, want the index's %s", got, want)
			}
			if code, body := e.appendCode("alice", "deleting", user("late")); code != http.StatusConflict {
				t.Fatalf("an append to a chat the index marks deleting = %d %s, want 409", code, body)
			}
			if code, out := e.do("alice", "GET", "/v1/chats/idle/retention", nil); code != 200 || strings.TrimSpace(string(out)) != `{"days":5}` {
				t.Fatalf("the old chat's retention = %d %s", code, out)
			}

			// Its next append moves the state; the one after reads no index.
			e.append("alice", "active", user("again"))
			n.reads.Store(0)
			e.append("alice", "active", user("and again"))
			if r := n.reads.Load(); r != 0 {
				t.Fatalf("an append after the move read %d items of the tenant's partition", r)
			}

			// The deletion under way finishes from its message; the sweep
			// deletes the chat idle past its own 5 days, and keeps the
			// active one.
			if _, err := e.tasks.Route(t.Context(), `{"kind":"delete","tenant":"alice","chat":"deleting","n":"`+e.current("alice", "deleting").Inc+`"}`); err != nil {
				t.Fatalf("the deletion's message = %v", err)
			}
			// The tenant is enrolled in sweeps (the index items were moved
			// back by hand), keeping no default.
			if err := e.chats.SetTenantRetention(t.Context(), "alice", 0); err != nil {
				t.Fatal(err)
			}
			if n, err := e.chats.ExpireAll(t.Context()); err != nil || n != 1 {
				t.Fatalf("sweep = %d, %v, want the idle chat", n, err)
			}
			e.drain()
			var left []string
			for _, c := range e.list("alice", "").Chats {
				left = append(left, c.Chat)
			}
			if strings.Join(left, ",") != "active" {
				t.Fatalf("left %v, want the active chat", left)
			}
			if ids := e.append("alice", "deleting", user("anew")); len(ids) != 1 || ids[0] != 0 {
				t.Fatalf("the deleted id's next append = %v, want a new chat", ids)
			}
		})
	}
}
