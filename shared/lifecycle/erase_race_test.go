package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// armedGate holds, once armed, the first call that matches until release
// is closed (or a bound only a hang reaches).
type armedGate struct {
	mu      sync.Mutex
	armed   bool
	started chan struct{} // closed when the held call starts
}

func newArmedGate() armedGate { return armedGate{started: make(chan struct{})} }

func (g *armedGate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

// hold holds the call when the gate is armed and match, until release.
func (g *armedGate) hold(ctx context.Context, match bool, release <-chan struct{}) {
	g.mu.Lock()
	hold := g.armed && match
	if hold {
		g.armed = false
	}
	g.mu.Unlock()
	if !hold {
		return
	}
	close(g.started)
	select {
	case <-release:
	case <-time.After(20 * time.Second):
	case <-ctx.Done():
	}
}

// gatedImagePut holds the next put of one image key, once armed, until
// that key is deleted: the window in which an append has passed its
// references and stores its image while an erasure releases it.
type gatedImagePut struct {
	store.Blobs
	armedGate
	key     string
	deleted chan struct{} // closed when the key is deleted
}

func newGatedImagePut(b store.Blobs, key string) *gatedImagePut {
	return &gatedImagePut{Blobs: b, armedGate: newArmedGate(), key: key, deleted: make(chan struct{})}
}

func (g *gatedImagePut) Put(ctx context.Context, key string, b store.Blob) error {
	g.hold(ctx, key == g.key, g.deleted)
	return g.Blobs.Put(ctx, key, b)
}

func (g *gatedImagePut) Delete(ctx context.Context, key string) error {
	err := g.Blobs.Delete(ctx, key)
	if key == g.key && err == nil {
		g.mu.Lock()
		select {
		case <-g.deleted:
		default:
			close(g.deleted)
		}
		g.mu.Unlock()
	}
	return err
}

// getImage is the status of GET .../images/{name} through the chat.
func (e *env) getImage(tenant, chat, name string) int {
	e.t.Helper()
	code, _ := e.do(tenant, "GET", "/v1/chats/"+chat+"/images/"+name, nil)
	return code
}

// appendAsync appends msg in a goroutine and answers its answer.
func (e *env) appendAsync(tenant, chat string, msg map[string]any) <-chan answer {
	answered := make(chan answer, 1)
	go func() {
		a, err := e.send(tenant, "POST", "/v1/chats/"+chat+"/messages", map[string]any{"messages": []map[string]any{msg}})
		if err != nil {
			a = answer{code: -1, body: err.Error()}
		}
		answered <- a
	}()
	return answered
}

// servedTillItsChatGoes checks that the image b64, which a live message
// of the chat names, is stored and served through the chat, and that
// deleting the chat, the only one naming it, deletes it.
func (e *env) servedTillItsChatGoes(tenant, chat, b64 string, rec lifecycle.Erasure) {
	e.t.Helper()
	if code := e.getImage(tenant, chat, images.Name(b64)); code != http.StatusOK || !e.imageStored(tenant, b64) {
		e.t.Fatalf("a live message names the image, and it is served %d (stored %v); receipt %+v", code, e.imageStored(tenant, b64), rec)
	}
	e.deleteAll(tenant, chat)
	e.drain()
	if e.imageStored(tenant, b64) {
		e.t.Fatal("the image outlived the only chat that named it")
	}
}

// An append naming an image while the erasure of another message naming
// it releases the image: the append answers 200 and the image survives,
// served through the chat, as a live message names it; and deleting the
// chat then deletes it (no unnamed bytes are left). The append has passed
// its references (the chat named the image then) and stores the image
// just as the erasure deletes it.
func TestAnAppendNamingAnImageWhileItIsReleasedByAnErasureKeepsIt(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			shot := pngB64(t, color.RGBA{17, 71, 117, 255})
			name := images.Name(shot)
			gate := newGatedImagePut(kb.Blobs, store.ImageKey("alice", name))
			b := kb.Backend
			b.Blobs = gate
			e := newEnv(t, b, 0)
			ids := e.append("alice", "c", user("first"), withImage("the photo", shot))
			code, rec, body := e.erase("alice", "c", map[string]any{"seqs": []int64{ids[1]}})
			if code != http.StatusOK && code != http.StatusAccepted {
				t.Fatalf("erase: %d %s", code, body)
			}
			gate.arm()
			answered := e.appendAsync("alice", "c", withImage("the photo again", shot))
			<-gate.started
			e.drain() // the erasure's release, in its task
			if a := <-answered; a.code != http.StatusOK {
				t.Fatalf("the append racing the erasure answered %d %s", a.code, a.body)
			}
			e.drain()
			rec = e.erasure("alice", "c", rec.Erasure)
			e.servedTillItsChatGoes("alice", "c", shot, rec)
		})
	}
}

// deleteUntilGone sends DELETE until the chat is deleted, for a
// goroutine: it returns every answer that was neither 200 nor 202.
func (e *env) deleteUntilGone(tenant, chat string) []answer {
	var odd []answer
	for range 1000 {
		a, err := e.send(tenant, "DELETE", "/v1/chats/"+chat, nil)
		if err != nil {
			return append(odd, answer{code: -1, body: err.Error()})
		}
		var d struct{ Deleted bool }
		switch {
		case a.code == http.StatusOK && json.Unmarshal([]byte(a.body), &d) == nil && d.Deleted:
			return odd
		case a.code != http.StatusOK && a.code != http.StatusAccepted:
			odd = append(odd, a)
		}
	}
	return append(odd, answer{code: -1, body: "the chat was never deleted"})
}

// A chat deleted while an erasure of one of its messages releases its
// image: both end, no answer is a 500, the chat leaves no key behind
// (not the image, nor a reference the erasure wrote again), and the
// erasure's receipt answers 404 (the chat it was of is gone) or done.
func TestAChatDeletedWhileAnErasureRunsIsGoneWhole(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			b := kb.Backend
			fire := make(chan struct{})
			var once sync.Once
			b.Table = leaseTaken{Table: b.Table, taken: func(store.Key) { once.Do(func() { close(fire) }) }}
			e := newEnvBuilding(t, b, 0, nil, nil, settleSoon)
			before := kb.sortedKeys(t)
			shot := pngB64(t, color.RGBA{33, 66, 99, 255})
			var msgs []map[string]any
			for i := range 12 {
				msgs = append(msgs, user(fmt.Sprint("message ", i)))
			}
			msgs = append(msgs, withImage("the photo", shot), withImage("the photo again", shot))
			ids := e.append("alice", "gone", msgs...)
			code, rec, body := e.erase("alice", "gone", map[string]any{"seqs": []int64{ids[12]}})
			if code != http.StatusOK && code != http.StatusAccepted {
				t.Fatalf("erase: %d %s", code, body)
			}
			odd := make(chan []answer, 1)
			go func() {
				<-fire // the erasure holds the image's lease
				odd <- e.deleteUntilGone("alice", "gone")
			}()
			e.drain()                       // the erasure's release, racing the deletion
			once.Do(func() { close(fire) }) // (or after it, when it took no lease)
			if a := <-odd; len(a) > 0 {
				t.Errorf("the deletion racing the erasure answered %+v", a)
			}
			a, err := e.send("alice", "GET", "/v1/chats/gone/erasures/"+rec.Erasure, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.code != http.StatusNotFound && (a.code != http.StatusOK || !strings.Contains(a.body, `"done":true`)) {
				t.Errorf("the erasure's receipt after the deletion: %d %s", a.code, a.body)
			}
			e.drainUntil(func() bool { return slices.Equal(before, kb.sortedKeys(t)) })
			if after := kb.sortedKeys(t); !slices.Equal(before, after) {
				t.Errorf("keys left by the deleted chat: %q", added(before, after))
			}
			if e.imageStored("alice", shot) {
				t.Error("the image outlived its chat")
			}
		})
	}
}

// inFlight is the quoting compactor, but a merge whose source holds find
// quotes it whole, and the first runs during before its line is returned:
// an ancestor's build in flight while during runs.
type inFlight struct {
	quoting
	find   string
	once   *sync.Once
	during func(context.Context)
}

func (f inFlight) Compact(ctx context.Context, c memory.CompactRequest) (memory.Compacted, error) {
	out, err := f.quoting.Compact(ctx, c)
	if c.Level > 0 && strings.Contains(c.Source, f.find) {
		f.once.Do(func() { f.during(ctx) })
		out.Line = "summary of " + c.Source // the words it was given
	}
	return out, err
}

// An ancestor's build in flight while an erasure of a message below it
// runs returns a line holding the erased words: that line is never
// shown, through any route of any process, neither while the build is in
// flight nor once it has returned; the rebuild then leaves the summaries
// whole, without the words.
func TestALineBuiltWhileItsMessageIsErasedIsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "PASSPORT-Q98765432"
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			var (
				e, other *env
				seq      int64
				rec      lifecycle.Erasure
				shown    []string
				erased   bool
			)
			look := func(when string) {
				for _, p := range []*env{e, other} {
					for _, route := range []string{"view", "tree", "tree?level=1", "tree?level=2", "messages"} {
						a, err := p.send("alice", "GET", "/v1/chats/c/"+route, nil)
						if err != nil || a.code != http.StatusOK || strings.Contains(a.body, secret) {
							shown = append(shown, fmt.Sprintf("%s, %s: %d %v %s", when, route, a.code, err, a.body))
						}
					}
				}
			}
			comp := inFlight{find: secret, once: &sync.Once{}, during: func(context.Context) {
				a, err := e.send("alice", "POST", "/v1/chats/c/erase", map[string]any{"seqs": []int64{seq}})
				if err == nil && (a.code == http.StatusOK || a.code == http.StatusAccepted) {
					erased = json.Unmarshal([]byte(a.body), &rec) == nil
				}
				look("the build in flight")
			}}
			e = newEnvBuilding(t, kb.Backend, 0, nil, comp)
			other = newEnvBuilding(t, kb.Backend, 0, nil, quoting{})
			var msgs []map[string]any
			for i := range 8 {
				text := fmt.Sprint("message ", i)
				if i == 3 {
					text = "my number is " + secret
				}
				msgs = append(msgs, longUser(text, 1_700_000_000_000+int64(i)))
			}
			seq = e.append("alice", "c", msgs...)[3]
			e.build()
			if !erased {
				t.Fatal("no merge over the message was built: the erasure never ran with a build in flight")
			}
			look("the build returned")
			e.build()
			look("rebuilt")
			if got := e.erasure("alice", "c", rec.Erasure); !got.Done || got.Rebuilt != len(got.Nodes) {
				t.Errorf("receipt after the rebuild: %+v", got)
			}
			if view := e.get("alice", "c", "view"); strings.Contains(view, "not summarized yet") {
				t.Errorf("the view is not rebuilt: %s", view)
			}
			var st struct{ Nodes, Built, Unbuilt int }
			if err := json.Unmarshal([]byte(e.get("alice", "c", "status")), &st); err != nil || st.Built != st.Nodes || st.Unbuilt != 0 {
				t.Errorf("status after the rebuild: %+v (%v), want every node built once", st, err)
			}
			for _, s := range shown {
				t.Error(s)
			}
		})
	}
}

// gatedRows holds, once armed, the first entry row an append writes
// until let is closed: the append has passed its references and not yet
// logged the message naming its image.
type gatedRows struct {
	store.Table
	armedGate
	let chan struct{}
}

func (g *gatedRows) Create(ctx context.Context, it store.Item) error {
	g.hold(ctx, strings.HasPrefix(it.SK, store.EntryPrefix), g.let)
	return g.Table.Create(ctx, it)
}

// heldDelays keeps every erase task sent with a delay until the test
// sends them on (flush): the delay outlasts whatever the test runs
// before.
type heldDelays struct {
	store.Queue
	mu   sync.Mutex
	held []string
}

func (h *heldDelays) Send(ctx context.Context, body string, delay time.Duration) error {
	if m, err := tasks.Decode(body); err == nil && m.Kind == tasks.Erase && delay > 0 {
		h.mu.Lock()
		h.held = append(h.held, body)
		h.mu.Unlock()
		return nil
	}
	return h.Queue.Send(ctx, body, delay)
}

func (h *heldDelays) flush(ctx context.Context) error {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, body := range held {
		if err := h.Queue.Send(ctx, body, 0); err != nil {
			return err
		}
	}
	return nil
}

// An append that found its image's references whole before an erasure
// of another message naming the image released them, and logs its
// message only after the erasure scanned the chat, keeps the image: the
// erasure deletes no image's bytes until SettleAfter has passed (longer
// than any append), then scans again, finds the message and names the
// image for the chat again. Until then its receipt is not done.
func TestAnAppendLoggedAfterAnErasuresScanKeepsItsImage(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			shot := pngB64(t, color.RGBA{71, 17, 171, 255})
			rows := &gatedRows{Table: kb.Table, armedGate: newArmedGate(), let: make(chan struct{})}
			delays := &heldDelays{Queue: kb.Queue}
			b := kb.Backend
			b.Table, b.Queue = rows, delays
			e := newEnvBuilding(t, b, 0, nil, quoting{}, settleSoon)
			ids := e.append("alice", "c", user("first"), withImage("the photo", shot))
			e.build()
			rows.arm()
			answered := e.appendAsync("alice", "c", withImage("the photo again", shot))
			<-rows.started // the append's references were whole
			code, rec, body := e.erase("alice", "c", map[string]any{"seqs": []int64{ids[1]}})
			if code != http.StatusOK && code != http.StatusAccepted {
				t.Fatalf("erase: %d %s", code, body)
			}
			e.build() // the erasure's release, its scan missing the held message, and its rebuild
			if got := e.erasure("alice", "c", rec.Erasure); got.Done || got.Rebuilt != len(got.Nodes) {
				t.Errorf("want the lines rebuilt and the erasure not done before its images are settled: %+v", got)
			}
			close(rows.let)
			if a := <-answered; a.code != http.StatusOK {
				t.Fatalf("the append racing the erasure answered %d %s", a.code, a.body)
			}
			if err := delays.flush(t.Context()); err != nil { // SettleAfter has passed
				t.Fatal(err)
			}
			e.drainUntil(func() bool { return e.erasure("alice", "c", rec.Erasure).Done })
			rec = e.erasure("alice", "c", rec.Erasure)
			if !rec.Done || rec.ImagesKept != 1 || len(rec.ImagesDeleted) != 0 {
				t.Errorf("receipt: %+v, want done with the image kept", rec)
			}
			e.servedTillItsChatGoes("alice", "c", shot, rec)
		})
	}
}
