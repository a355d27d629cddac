package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// env is the memory API's routes and the hooks over one backend, with two
// tenants.
type env struct {
	t       *testing.T
	b       testenv.Backend
	chats   *lifecycle.Routes
	uploads *hooks.Uploads
	memory  *memory.Memory
	// tasks routes the lifecycle's queue tasks, passing builds over;
	// consumer runs every task, builds by memory, as the programs do.
	tasks    *tasks.Router
	consumer *tasks.Consumer
	url      string
	tokens   map[string]string // tenant -> token
}

// backends are every real backend, plus the AWS adapters on dynalite, the
// strict DynamoDB.
func backends(t *testing.T) []testenv.Backend {
	all := testenv.All(t)
	if !testing.Short() {
		for _, b := range all {
			if b.Name == "aws" {
				d := awstest.StartDynalite(t)
				b.Name, b.Table = "dynalite", dynamo.New(d.Client, d.CreateTable(t))
				all = append(all, b)
				break
			}
		}
	}
	return all
}

func newEnv(t *testing.T, b testenv.Backend, steps int) *env {
	t.Helper()
	return newEnvAt(t, b, steps, nil)
}

// newEnvAt is newEnv with the lifecycle's clock (nil: the wall clock).
func newEnvAt(t *testing.T, b testenv.Backend, steps int, now func() time.Time) *env {
	t.Helper()
	return newEnvBuilding(t, b, steps, now, nil)
}

// newEnvBuilding is newEnvAt whose memory builds nodes with comp (nil:
// it schedules builds but builds nothing), and whose lifecycle config each
// of opts changes. Each env is one process: its own memory, caches and
// server.
func newEnvBuilding(t *testing.T, b testenv.Backend, steps int, now func() time.Time, comp memory.Compactor, opts ...func(*lifecycle.Config)) *env {
	t.Helper()
	imgs := images.New(b.Blobs)
	if b.Name != "embedded" {
		// S3 stages direct uploads until a ref claims them; the local
		// server checks them as they arrive.
		imgs.Staging = b.Blobs
	}
	cfg := lifecycle.Config{Table: b.Table, Blobs: b.Blobs, Images: imgs, Linker: b.Linker, Queue: b.Queue, Steps: steps, Now: now}
	for _, opt := range opts {
		opt(&cfg)
	}
	core := lifecycle.New(cfg)
	tl := transcript.New(transcript.Config{Table: b.Table, Blobs: b.Blobs, Images: imgs, Chats: core})
	logger := testenv.Logger(t)
	mc := memory.Config{Table: b.Table, Transcript: tl, Images: imgs, Queue: b.Queue, Chats: core, Logger: logger}
	if comp != nil {
		mc.Compactor, mc.Descriptions, mc.Search = comp, imgs, true
	}
	m, err := memory.New(mc)
	if err != nil {
		t.Fatal(err)
	}
	chats := lifecycle.NewRoutes(core, tl, m)
	tokens := map[string]string{"alice": "tok-alice", "bob": "tok-bob"}
	byToken := map[string]string{}
	for tenant, tok := range tokens {
		byToken[tok] = tenant
	}
	uploader, _ := b.Linker.(store.Uploader)
	uploads := hooks.NewUploads(imgs, uploader, core)
	h, err := app.Handler(logger, api.BearerTokens(byToken), app.Stores{Table: b.Table, Blobs: b.Blobs},
		[]api.Routes{transcript.NewRoutes(tl, imgs, m), m, chats, hooks.NewOffload(imgs, core), uploads, hooks.NewRestore(imgs, b.Linker)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tc := tasks.Config{Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{
		tasks.Build: m.BuildTask, tasks.Delete: core.DeletionTask, tasks.Settle: core.SettleTask, tasks.Expire: core.SweepTask,
		tasks.Erase: chats.EraseTask,
	}), Queue: b.Queue, Visibility: m.ClaimLease(), Logger: logger}
	if comp != nil {
		tc.Retrier = b.Receiver
	}
	consumer := tasks.NewConsumer(tc)
	lt := lifecycleTasks(core)
	lt.Handle(tasks.Erase, chats.EraseTask)
	return &env{t: t, b: b, chats: chats, uploads: uploads, memory: m, tasks: lt, consumer: consumer, url: srv.URL, tokens: tokens}
}

// lifecycleTasks routes the lifecycle's queue tasks as the programs do.
// Build messages share the queue; only the lifecycle's matter here, so
// builds are passed over.
func lifecycleTasks(c *lifecycle.Chats) *tasks.Router {
	return tasks.NewRouter(map[tasks.Kind]tasks.Handler{
		tasks.Build:  func(context.Context, tasks.Message) error { return nil },
		tasks.Delete: c.DeletionTask, tasks.Settle: c.SettleTask, tasks.Expire: c.SweepTask,
	})
}

func (e *env) do(tenant, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// append posts msgs to the chat and fails the test unless it is logged.
func (e *env) append(tenant, chat string, msgs ...map[string]any) []int64 {
	e.t.Helper()
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/messages", map[string]any{"messages": msgs})
	if code != http.StatusOK {
		e.t.Fatalf("append to %s: %d %s", chat, code, body)
	}
	var out struct{ IDs []int64 }
	if err := json.Unmarshal(body, &out); err != nil {
		e.t.Fatal(err)
	}
	return out.IDs
}

func user(text string) map[string]any {
	return map[string]any{"role": "user", "content": text, "timestamp": 1_700_000_000_000}
}

func withImage(text, b64 string) map[string]any {
	return map[string]any{"role": "user", "timestamp": 1_700_000_000_000, "content": []map[string]any{
		{"type": "text", "text": text}, {"type": "image", "data": b64, "mimeType": "image/png"}}}
}

// pngB64 is a small PNG of one colour, base64.
func pngB64(t testing.TB, c color.Color) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func (e *env) imageStored(tenant, b64 string) bool {
	e.t.Helper()
	_, err := e.b.Blobs.Head(e.t.Context(), store.ImageKey(tenant, images.Name(b64)))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.t.Fatal(err)
	}
	return err == nil
}

func (e *env) list(tenant, query string) lifecycle.ChatList {
	e.t.Helper()
	code, body := e.do(tenant, "GET", "/v1/chats"+query, nil)
	if code != http.StatusOK {
		e.t.Fatalf("list: %d %s", code, body)
	}
	var l lifecycle.ChatList
	if err := json.Unmarshal(body, &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) messages(tenant, chat, query string) lifecycle.MessagePage {
	e.t.Helper()
	code, body := e.do(tenant, "GET", "/v1/chats/"+chat+"/messages"+query, nil)
	if code != http.StatusOK {
		e.t.Fatalf("messages: %d %s", code, body)
	}
	var p lifecycle.MessagePage
	if err := json.Unmarshal(body, &p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) delete(tenant, chat string) (int, lifecycle.DeleteAnswer) {
	e.t.Helper()
	code, body := e.do(tenant, "DELETE", "/v1/chats/"+chat, nil)
	var a lifecycle.DeleteAnswer
	if code == http.StatusOK || code == http.StatusAccepted {
		if err := json.Unmarshal(body, &a); err != nil {
			e.t.Fatal(err)
		}
	} else {
		e.t.Fatalf("delete %s: %d %s", chat, code, body)
	}
	return code, a
}

// drain runs the lifecycle's queue messages until the queue is empty, as
// the compact function (or the local worker) does.
func (e *env) drain() {
	e.t.Helper()
	ctx := e.t.Context()
	for range 50 {
		ds, err := e.b.Receiver.Receive(ctx, 10, time.Minute, time.Second)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
		for _, d := range ds {
			if _, err := e.tasks.Route(ctx, d.Body); err != nil {
				e.t.Fatalf("Route(%s): %v", d.Body, err)
			}
			if err := e.b.Receiver.Ack(ctx, d.Receipt); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	e.t.Fatal("the queue did not drain")
}

// drainUntil runs the queue's tasks until done holds or a minute has
// passed, for work queued with a delay: drain ends at the first receive
// that finds nothing, which a message whose delay has not ended is not in.
// The caller's checks then say what is missing.
func (e *env) drainUntil(done func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		e.drain()
		if done() {
			return
		}
	}
}

// current is the chat's current incarnation.
func (e *env) current(tenant, chat string) chatid.Chat {
	e.t.Helper()
	c, _, err := chatid.New(e.b.Table).Current(e.t.Context(), tenant, chat)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// partition returns the sort keys left in the partition of the
// incarnation c and in its chat's home partition (its identity item).
func (e *env) partition(c chatid.Chat) []string {
	e.t.Helper()
	var sks []string
	for _, pk := range []string{c.PK(), store.ChatPK(c.Tenant, c.ID)} {
		for _, it := range e.itemsOf(pk) {
			sks = append(sks, pk+" "+it.SK)
		}
	}
	return sks
}

func TestListShowsOnlyTheTenantsOwnChatsPaged(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			for _, c := range []string{"c1", "c2", "c3"} {
				e.append("alice", c, user("hi "+c), user("again"))
			}
			e.append("bob", "b1", user("bob's"))
			l := e.list("alice", "?limit=2")
			if len(l.Chats) != 2 || l.Chats[0].Chat != "c1" || l.Chats[1].Chat != "c2" || l.Next != "c2" {
				t.Fatalf("first page = %+v, want c1, c2 and next c2", l)
			}
			if l.Chats[0].Messages != 2 || l.Chats[0].LastActivity.IsZero() || l.Chats[0].Memory.Nodes != 3 {
				t.Fatalf("c1 = %+v, want 2 messages, an activity time and 3 memory nodes", l.Chats[0])
			}
			l = e.list("alice", "?limit=2&after=c2")
			if len(l.Chats) != 1 || l.Chats[0].Chat != "c3" || l.Next != "" {
				t.Fatalf("second page = %+v, want c3 and no next", l)
			}
			l = e.list("bob", "")
			if len(l.Chats) != 1 || l.Chats[0].Chat != "b1" {
				t.Fatalf("bob's chats = %+v, want b1 alone", l)
			}
			for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?after=a/b"} {
				if code, body := e.do("alice", "GET", "/v1/chats"+q, nil); code != http.StatusBadRequest {
					t.Errorf("GET /v1/chats%s = %d %s, want 400", q, code, body)
				}
			}
		})
	}
}

func TestMessagesReadBackInOrderWithStablePagesAndLinks(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shot := pngB64(t, color.RGBA{200, 10, 10, 255})
			e.append("alice", "c", user("one"), withImage("two", shot),
				map[string]any{"role": "assistant", "timestamp": 1_700_000_001_000, "content": []map[string]any{
					{"type": "text", "text": "three"}, {"type": "toolCall", "id": "t1", "name": "grep", "arguments": map[string]any{"q": "x"}}}})
			p := e.messages("alice", "c", "?limit=2")
			if len(p.Messages) != 2 || p.Messages[0].Seq != 0 || p.Messages[1].Seq != 1 || p.Next != "1" {
				t.Fatalf("first page = %+v, want seqs 0, 1 and next 1", p)
			}
			// Appends between pages do not move what the next page holds.
			e.append("alice", "c", user("five"))
			p2 := e.messages("alice", "c", "?limit=10&after="+p.Next)
			var texts []string
			for _, m := range p2.Messages {
				texts = append(texts, string(m.Message))
			}
			// The assistant's message is two entries (its text, its tool
			// call) and reads back as the one message it was.
			if len(p2.Messages) != 2 || p2.Messages[0].Seq != 2 || p2.Messages[1].Seq != 4 || p2.Next != "" {
				t.Fatalf("second page = %v, want seqs 2 and 4 and no next", texts)
			}
			if !strings.Contains(texts[0], `"role":"assistant"`) || !strings.Contains(texts[0], `"toolCall"`) || !strings.Contains(texts[1], `"five"`) {
				t.Fatalf("second page = %v, want the assistant's text and tool call, then the new user message", texts)
			}
			var m struct {
				Role      string
				Timestamp int64
				Content   []struct{ Type, Text, Name, URL string }
			}
			if err := json.Unmarshal(p.Messages[1].Message, &m); err != nil {
				t.Fatal(err)
			}
			name := images.Name(shot)
			if m.Role != "user" || m.Timestamp != 1_700_000_000_000 || len(m.Content) != 2 || m.Content[1].Type != "text" || m.Content[1].Text != "[image "+name+"]" || m.Content[1].URL != "" {
				t.Fatalf("message 1 = %+v, want the user's text and a ref to %s, no url", m, name)
			}
			p = e.messages("alice", "c", "?after=0&limit=1&images=links")
			if err := json.Unmarshal(p.Messages[0].Message, &m); err != nil {
				t.Fatal(err)
			}
			res, err := http.Get(m.Content[1].URL)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET the signed link = %d, want 200", res.StatusCode)
			}
			for _, q := range []string{"?after=-1", "?after=x", "?images=data", "?limit=0"} {
				if code, body := e.do("alice", "GET", "/v1/chats/c/messages"+q, nil); code != http.StatusBadRequest {
					t.Errorf("GET messages%s = %d %s, want 400", q, code, body)
				}
			}
		})
	}
}

func TestDeleteRemovesTheChatAndTheImagesOnlyItUsed(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shared, own := pngB64(t, color.RGBA{1, 2, 3, 255}), pngB64(t, color.RGBA{4, 5, 6, 255})
			e.append("alice", "gone", withImage("shared", shared), withImage("own", own), user("more"))
			e.append("alice", "kept", withImage("shared too", shared))
			e.append("bob", "gone", withImage("bob's copy", own)) // another tenant's image is its own
			// What the image showed goes with it.
			descs := images.New(e.b.Blobs)
			if err := descs.PutDescription(t.Context(), "alice", images.Name(own), "a red square"); err != nil {
				t.Fatal(err)
			}

			gone := e.current("alice", "gone")
			code, a := e.delete("alice", "gone")
			if code != http.StatusOK || !a.Deleted || !a.Progress.Done || a.Progress.Images != 1 || a.Chat != "gone" {
				t.Fatalf("delete = %d %+v, want 200, deleted, one image", code, a)
			}
			if left := e.partition(gone); len(left) != 0 {
				t.Fatalf("items left in the deleted chat: %v", left)
			}
			if e.imageStored("alice", own) || !e.imageStored("alice", shared) || !e.imageStored("bob", own) {
				t.Fatal("want only alice's image that no other chat of hers names deleted")
			}
			if _, err := descs.Description(t.Context(), "alice", images.Name(own)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the deleted image's description reads %v, want it deleted too", err)
			}
			for _, c := range e.list("alice", "").Chats {
				if c.Chat == "gone" {
					t.Fatalf("the deleted chat is still listed: %+v", c)
				}
			}
			// Deleting again is done at once; the id names a new, empty chat.
			if code, a := e.delete("alice", "gone"); code != http.StatusOK || !a.Deleted || a.Progress.Removed != 0 {
				t.Fatalf("second delete = %d %+v, want 200 and nothing removed", code, a)
			}
			if ids := e.append("alice", "gone", user("anew")); len(ids) != 1 || ids[0] != 0 {
				t.Fatalf("first append after delete = %v, want id 0", ids)
			}
			if p := e.messages("alice", "gone", ""); len(p.Messages) != 1 || !strings.Contains(string(p.Messages[0].Message), "anew") {
				t.Fatalf("the reused chat reads %+v, want only the new message", p)
			}
			// The kept chat's image goes with the last chat naming it.
			e.delete("alice", "kept")
			if e.imageStored("alice", shared) {
				t.Fatal("the shared image survived the deletion of the last chat naming it")
			}
		})
	}
}

func TestDeleteRemovesTheChatsTextsTooBigForTheirRowsAndNoOtherChats(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			// A tool call is one entry, never split: 400 KB of arguments
			// leave the row for a text object.
			content := strings.Repeat("0123456789abcdef", 400<<10/16)
			call := map[string]any{"role": "assistant", "timestamp": 1_700_000_001_000, "content": []map[string]any{
				{"type": "toolCall", "id": "t1", "name": "write", "arguments": map[string]any{"content": content}}}}
			e.append("alice", "gone", user("write it"), call)
			e.append("alice", "kept", call)
			gone, kept := e.current("alice", "gone"), e.current("alice", "kept")
			texts := func(c chatid.Chat) []string {
				keys, err := e.b.Blobs.List(t.Context(), c.TextPrefix(), "", 100)
				if err != nil {
					t.Fatal(err)
				}
				return keys
			}
			if len(texts(gone)) == 0 || len(texts(kept)) == 0 {
				t.Fatalf("texts gone %q, kept %q: want each chat's tool call moved out of its row", texts(gone), texts(kept))
			}
			if code, a := e.delete("alice", "gone"); code != http.StatusOK || !a.Deleted {
				t.Fatalf("delete = %d %+v, want 200 and deleted", code, a)
			}
			if left := texts(gone); len(left) != 0 {
				t.Fatalf("texts of the deleted chat left: %q", left)
			}
			if len(texts(kept)) == 0 {
				t.Fatal("the other chat's copy of the same text was deleted")
			}
			if p := e.messages("alice", "kept", ""); len(p.Messages) != 1 || !strings.Contains(string(p.Messages[0].Message), content) {
				t.Fatal("the other chat no longer reads its tool call back whole")
			}
		})
	}
}

func TestDeleteOfALargeChatRunsInStepsThroughTheQueue(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 1) // one step of StepItems per call
			var msgs []map[string]any
			for i := range 2*lifecycle.StepItems + 10 {
				msgs = append(msgs, user(fmt.Sprint("m", i)))
			}
			e.append("alice", "big", msgs...)
			big := e.current("alice", "big")
			code, a := e.delete("alice", "big")
			if code != http.StatusAccepted || a.Deleted || a.Progress.Removed != lifecycle.StepItems {
				t.Fatalf("delete = %d %+v, want 202 after one step", code, a)
			}
			l := e.list("alice", "")
			if len(l.Chats) != 1 || l.Chats[0].Deleting == nil || l.Chats[0].Deleting.Removed != lifecycle.StepItems {
				t.Fatalf("list during the deletion = %+v, want its progress", l)
			}
			code, body := e.do("alice", "GET", "/v1/chats/big/status", nil)
			var st struct {
				Deleting *struct{ Removed int64 } `json:"deleting"`
			}
			if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.Deleting == nil || st.Deleting.Removed != lifecycle.StepItems {
				t.Fatalf("status during the deletion = %d %s, want its progress", code, body)
			}
			if code, body := e.do("alice", "POST", "/v1/chats/big/messages", map[string]any{"messages": []any{user("late")}}); code != http.StatusConflict {
				t.Fatalf("append during the deletion = %d %s, want 409", code, body)
			}
			// The queue carries the rest, one step per message.
			e.drain()
			if left := e.partition(big); len(left) != 0 {
				t.Fatalf("%d items left after the queue drained", len(left))
			}
			if l := e.list("alice", ""); len(l.Chats) != 0 {
				t.Fatalf("list after the deletion = %+v, want none", l)
			}
		})
	}
}

func TestDeleteCutOffMidwayIsFinishedByTheNextCall(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var deletes, failAfter atomic.Int64
			failAfter.Store(-1)
			crash := func() error {
				if n := deletes.Add(1); failAfter.Load() >= 0 && n > failAfter.Load() {
					return testenv.Outage("crash")
				}
				return nil
			}
			ft := &testenv.FailingTable{Table: b.Table, FailDelete: func(store.Key) error { return crash() }}
			fb := &testenv.FailingBlobs{Blobs: b.Blobs, FailDelete: func(string) error { return crash() }}
			b.Table, b.Blobs = ft, fb
			e := newEnv(t, b, 0)
			one, two := pngB64(t, color.RGBA{9, 9, 9, 255}), pngB64(t, color.RGBA{8, 8, 8, 255})
			e.append("alice", "c", withImage("a", one), withImage("b", two), user("c"), user("d"))
			e.append("alice", "other", user("x"))
			// Cut off after every possible number of deletions, then finish.
			for cut := int64(0); ; cut++ {
				c := e.current("alice", "c")
				deletes.Store(0)
				failAfter.Store(cut)
				_, err := e.chats.Delete(t.Context(), "alice", "c", 0)
				failAfter.Store(-1)
				if err == nil {
					break
				}
				if !store.IsOutage(err) {
					t.Fatalf("cut after %d deletions: %v, want the injected outage", cut, err)
				}
				p, err := e.chats.Delete(t.Context(), "alice", "c", 0)
				if err != nil || !p.Done {
					t.Fatalf("the call after a cut at %d = %+v, %v, want done", cut, p, err)
				}
				if left := e.partition(c); len(left) != 0 {
					t.Fatalf("cut at %d: items left %v", cut, left)
				}
				if e.imageStored("alice", one) || e.imageStored("alice", two) {
					t.Fatalf("cut at %d: an image of the deleted chat survived", cut)
				}
				// Write it again for the next cut.
				e.append("alice", "c", withImage("a", one), withImage("b", two), user("c"), user("d"))
			}
			if len(e.messages("alice", "other", "").Messages) != 1 {
				t.Fatal("the other chat lost its message")
			}
		})
	}
}

func TestAnImageNamedAgainWhileItIsBeingDeletedSurvives(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			shot := pngB64(t, color.RGBA{50, 60, 70, 255})
			key := store.ImageKey("alice", images.Name(shot))
			var e *env
			raced := make(chan int, 1)
			var once atomic.Bool
			fb := &testenv.FailingBlobs{Blobs: b.Blobs, FailDelete: func(k string) error {
				if k != key || !once.CompareAndSwap(false, true) {
					return nil
				}
				// The deletion holds the lease and found no reference:
				// another chat names the image now, before the blob goes.
				go func() {
					code, _ := e.do("alice", "POST", "/v1/chats/new/messages", map[string]any{"messages": []any{withImage("again", shot)}})
					raced <- code
				}()
				refs := store.RefPK("alice", images.Name(shot))
				for {
					page, err := b.Table.Query(context.Background(), store.Query{PK: refs, Prefix: "c/"})
					if err == nil && len(page.Items) > 0 {
						return nil
					}
					time.Sleep(5 * time.Millisecond)
				}
			}}
			b.Blobs = fb
			e = newEnv(t, b, 0)
			e.append("alice", "old", withImage("first", shot))
			if _, a := e.delete("alice", "old"); !a.Deleted || a.Progress.Images != 1 {
				t.Fatalf("delete = %+v, want the image deleted (no reference when it looked)", a)
			}
			if code := <-raced; code != http.StatusOK {
				t.Fatalf("the racing append = %d, want 200", code)
			}
			if !e.imageStored("alice", shot) {
				t.Fatal("the image named again during its deletion is gone")
			}
		})
	}
}

func TestRetentionDeletesChatsIdlePastTheirOwnOrTheTenantsSetting(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			now := func() time.Time { return time.UnixMilli(clock.Load()) }
			advance := func(d time.Duration) { clock.Add(d.Milliseconds()) }
			e := newEnvAt(t, b, 0, now)
			shot := pngB64(t, color.RGBA{33, 33, 33, 255})
			e.append("alice", "default", user("a"))
			e.append("alice", "short", withImage("b", shot))
			e.append("alice", "forever", user("c"))
			e.append("bob", "untouched", user("d")) // bob set no retention

			put := func(path string, body any) []byte {
				code, out := e.do("alice", "PUT", path, body)
				if code != http.StatusOK {
					t.Fatalf("PUT %s: %d %s", path, code, out)
				}
				return out
			}
			put("/v1/retention", map[string]any{"days": 30})
			put("/v1/chats/short/retention", map[string]any{"days": 1})
			put("/v1/chats/forever/retention", map[string]any{"days": 0})
			if got := strings.TrimSpace(string(put("/v1/chats/default/retention", map[string]any{"days": nil}))); got != `{"days":30,"inherited":true}` {
				t.Fatalf("a chat without its own setting reads %s, want the tenant's 30 days", got)
			}
			for _, body := range []string{`{"days":-1}`, `{"days":"x"}`, `{"days":1.5}`, `{}`} {
				var v any
				_ = json.Unmarshal([]byte(body), &v)
				if code, out := e.do("alice", "PUT", "/v1/retention", v); code != http.StatusBadRequest {
					t.Errorf("PUT /v1/retention %s = %d %s, want 400", body, code, out)
				}
				// A chat's body without days does not clear its setting.
				if code, out := e.do("alice", "PUT", "/v1/chats/short/retention", v); code != http.StatusBadRequest {
					t.Errorf("PUT /v1/chats/short/retention %s = %d %s, want 400", body, code, out)
				}
			}

			advance(2 * 24 * time.Hour)
			if n, err := e.chats.ExpireAll(t.Context()); err != nil || n != 1 {
				t.Fatalf("sweep after 2 days = %d, %v, want the 1-day chat", n, err)
			}
			e.drain()
			if e.imageStored("alice", shot) {
				t.Fatal("the expired chat's image survived")
			}
			advance(29 * 24 * time.Hour)
			if _, err := e.tasks.Route(t.Context(), `{"kind":"expire"}`); err != nil {
				t.Fatalf("the scheduled sweep message = %v", err)
			}
			e.drain()
			var left []string
			for _, c := range e.list("alice", "").Chats {
				left = append(left, c.Chat)
			}
			if strings.Join(left, ",") != "forever" {
				t.Fatalf("alice's chats after 31 days = %v, want only the one kept forever", left)
			}
			if l := e.list("bob", ""); len(l.Chats) != 1 {
				t.Fatalf("bob's chats = %+v, want his chat kept", l)
			}
		})
	}
}

// export reads the chat's whole export, part by part.
func (e *env) export(tenant, chat string) []byte {
	e.t.Helper()
	var all []byte
	after := ""
	for range 100 {
		req, _ := http.NewRequestWithContext(e.t.Context(), "GET", e.url+"/v1/chats/"+chat+"/export?after="+after, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-ndjson" {
			e.t.Fatalf("export: %d %s", res.StatusCode, body)
		}
		all = append(all, body...)
		if after = res.Header.Get(lifecycle.ExportNextHeader); after == "" {
			return all
		}
	}
	e.t.Fatal("the export did not end")
	return nil
}

func (e *env) importFile(tenant, chat string, file []byte) lifecycle.ImportResult {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.url+"/v1/chats/"+chat+"/import", bytes.NewReader(file))
	req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
	req.Header.Set("Content-Type", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("import: %d %s", res.StatusCode, body)
	}
	var r lifecycle.ImportResult
	if err := json.Unmarshal(body, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestAnExportImportedIntoAnotherTenantsChatExportsTheSameBytes(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shot := pngB64(t, color.RGBA{120, 130, 140, 255})
			e.append("alice", "src", withImage("look at this\nand this", shot),
				map[string]any{"role": "assistant", "timestamp": 1_700_000_002_000, "content": []map[string]any{
					{"type": "text", "text": "I see it"}, {"type": "thinking", "thinking": "hm"},
					{"type": "toolCall", "id": "c1", "name": "zoom", "arguments": map[string]any{"id": 0}}}},
				map[string]any{"role": "toolResult", "toolName": "zoom", "toolCallId": "c1", "timestamp": 1_700_000_003_000,
					"details": map[string]any{"id": 0}, "content": []map[string]any{{"type": "text", "text": "user: look at this"}}},
				map[string]any{"role": "user", "kind": "work", "timestamp": 1_700_000_004_000, "content": "a sub-agent's report"})
			first := e.export("alice", "src")
			if n := bytes.Count(first, []byte("\n")); n != 4 || !bytes.Contains(first, []byte(`"data":"`)) {
				t.Fatalf("export = %s, want 4 lines with the image inline", first)
			}
			r := e.importFile("bob", "copy", first)
			if r.Messages != 4 || r.Entries != 5 {
				t.Fatalf("import = %+v, want 4 messages as 5 entries", r)
			}
			if again := e.export("bob", "copy"); !bytes.Equal(again, first) {
				t.Fatalf("export of the import differs:\n%s\nwant\n%s", again, first)
			}
			e.importFile("bob", "copy", first)
			if again := e.export("bob", "copy"); !bytes.Equal(again, first) {
				t.Fatalf("importing again logged something twice:\n%s", again)
			}
			if !e.imageStored("bob", shot) {
				t.Fatal("the image was not imported under its name")
			}
		})
	}
}

func TestImportOfAPiSessionLogsTheBranchItEndedOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testenv.Embedded(t), 0)
	session := strings.Join([]string{
		`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}`,
		`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"fix the login","timestamp":1767225601000}}`,
		`{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"abandoned branch"}],"timestamp":1767225602000}}`,
		`{"type":"model_change","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:03.000Z","provider":"x","modelId":"y"}`,
		`{"type":"message","id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"on it"},{"type":"toolCall","id":"t","name":"bash","arguments":{"command":"ls"}}],"timestamp":1767225604000}}`,
		`{"type":"message","id":"e","parentId":"d","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolResult","toolCallId":"t","toolName":"bash","content":[{"type":"text","text":"login.go"}],"isError":false,"timestamp":1767225605000}}`,
	}, "\n")
	r := e.importFile("alice", "pi", []byte(session))
	if r.Messages != 3 || r.Entries != 4 || r.Skipped != 2 {
		t.Fatalf("import = %+v, want 3 messages (4 entries) of the last branch, the other branch and the model change skipped", r)
	}
	p := e.messages("alice", "pi", "")
	var got []string
	for _, m := range p.Messages {
		got = append(got, string(m.Message))
	}
	want := []string{
		`{"role":"user","content":"fix the login","timestamp":1767225601000}`,
		`{"role":"assistant","content":[{"type":"text","text":"on it"},{"type":"toolCall","id":"t","name":"bash","arguments":{"command":"ls"}}],"timestamp":1767225604000}`,
		`{"role":"toolResult","toolCallId":"t","toolName":"bash","content":[{"type":"text","text":"login.go"}],"isError":false,"timestamp":1767225605000}`,
	}
	if !jsonEqualLines(got, want) {
		t.Fatalf("read back:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if code, body := e.do("alice", "POST", "/v1/chats/pi/import", "not jsonl"); code != http.StatusBadRequest {
		t.Fatalf("import of a JSON string = %d %s, want 400", code, body)
	}
}

func TestAPageOfMessagesStopsAtItsByteBudget(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			// Ten messages of 250,000 four-byte characters: 10 entries of
			// 25,000 characters (100 KB each) and 1 MB each, 10 MB in all,
			// more than a page may carry.
			big := strings.Repeat("😀", 10*transcript.PieceChars)
			for range 10 {
				e.append("alice", "wide", user(big))
			}
			seen := int64(0)
			after := ""
			for pages := 0; ; pages++ {
				code, body := e.do("alice", "GET", "/v1/chats/wide/messages?limit=100"+after, nil)
				if code != http.StatusOK {
					t.Fatalf("page %d: %d %.200s", pages, code, body)
				}
				if len(body) > 4<<20+64<<10 {
					t.Errorf("page %d is %d bytes, want about 4 MB at most", pages, len(body))
				}
				var p lifecycle.MessagePage
				if err := json.Unmarshal(body, &p); err != nil {
					t.Fatal(err)
				}
				for _, m := range p.Messages {
					if m.Seq != seen*10 {
						t.Fatalf("page %d: seq %d, want %d", pages, m.Seq, seen*10)
					}
					seen++
				}
				if pages == 0 && len(p.Messages) == 10 {
					t.Fatal("the first page holds 10 messages of 1 MB: no byte budget")
				}
				if p.Next == "" {
					break
				}
				after = "&after=" + p.Next
			}
			if seen != 10 {
				t.Fatalf("read %d messages back, want 10", seen)
			}
		})
	}
}

func TestAnImportSplitsItsAppendsSoNoneNamesTooManyImages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testenv.Embedded(t), 0)
	// Three messages naming 400 images each: 1,200 in one append would be
	// refused, so the third starts an append of its own.
	var items []importfile.Item
	for m := range 3 {
		var text strings.Builder
		for i := range 400 {
			text.WriteString(refs.Ref(fmt.Sprintf("%016x", m*400+i+1)) + " ")
		}
		raw, err := json.Marshal(user(text.String()))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, importfile.Item{Line: m + 1, Message: raw})
	}
	for round := range 2 { // again: nothing logged twice
		if res, err := e.chats.Import(t.Context(), "alice", "many", items); err != nil || res.Entries != 3 {
			t.Fatalf("import %d: %+v, %v; want 3 entries", round, res, err)
		}
		if p := e.messages("alice", "many", ""); len(p.Messages) != 3 {
			t.Fatalf("after import %d the chat holds %d messages, want 3", round, len(p.Messages))
		}
	}
}

// jsonEqualLines reports whether each JSON text of got is the same JSON
// value as the one of want at its place: key order and spacing aside.
func jsonEqualLines(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		var a, b any
		if json.Unmarshal([]byte(got[i]), &a) != nil || json.Unmarshal([]byte(want[i]), &b) != nil {
			return false
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			return false
		}
	}
	return true
}

// TestAnImportSaysHowManyOfItsEntriesItLogged: New counts the entries
// this import logged, so a repeat of the same file answers 0, also in a
// chat that held entries before the first.
func TestAnImportSaysHowManyOfItsEntriesItLogged(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			e.append("alice", "c", user("logged before the import"))
			var items []importfile.Item
			for i, text := range []string{"one", "two"} {
				raw, err := json.Marshal(user(text))
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, importfile.Item{Line: i + 1, Message: raw})
			}
			for round, wantNew := range []int{2, 0, 0} {
				res, err := e.chats.Import(t.Context(), "alice", "c", items)
				if err != nil {
					t.Fatal(err)
				}
				if res.Messages != 2 || res.Entries != 2 || res.New != wantNew {
					t.Fatalf("import %d = %+v, want 2 messages as 2 entries, %d new", round+1, res, wantNew)
				}
			}
			if p := e.messages("alice", "c", ""); len(p.Messages) != 3 {
				t.Fatalf("the chat holds %d messages, want 3", len(p.Messages))
			}
		})
	}
}
