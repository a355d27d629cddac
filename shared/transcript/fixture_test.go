package transcript

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

const (
	tenant = "acme"
	chat   = "c1"
)

var errInjected = errors.New("injected outage")

// outage is what a failing store returns.
func outage(op string) error { return store.Unavailable(op, errInjected) }

// fixture is a log over one backend, with fault switches in front of it.
type fixture struct {
	name  string
	table *faultTable
	blobs *faultBlobs
	imgs  *images.Store
	log   *Log
	clock time.Time
}

func newFixture(t testing.TB, be testenv.Backend) *fixture {
	t.Helper()
	f := &fixture{name: be.Name, table: &faultTable{next: be.Table}, blobs: &faultBlobs{next: be.Blobs}}
	f.imgs = images.New(f.blobs)
	f.clock = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.log = New(Config{Table: f.table, Blobs: f.blobs, Images: f.imgs, Now: func() time.Time { return f.clock }})
	return f
}

// cur is the current incarnation of a chat, read past the fault switches.
func (f *fixture) cur(tenant, chat string) chatid.Chat {
	c, _, err := chatid.New(f.table.next).Current(context.Background(), tenant, chat)
	if err != nil {
		panic(err)
	}
	return c
}

// eachBackend runs fn once per backend as a subtest.
func eachBackend(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, be := range testenv.All(t) {
		t.Run(be.Name, func(t *testing.T) { fn(t, newFixture(t, be)) })
	}
}

// faultTable passes calls through until fail says otherwise, and records
// the size of every item written.
type faultTable struct {
	next store.Table
	mu   sync.Mutex
	// fail, when set, decides per call: op is "get", "create", "update",
	// "query" or "batchget"; key is the item's (or the query's PK).
	fail    func(op string, key store.Key) error
	written []store.Item
}

func (f *faultTable) check(op string, k store.Key) error {
	f.mu.Lock()
	fn := f.fail
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, k)
}

func (f *faultTable) setFail(fn func(op string, key store.Key) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *faultTable) record(it store.Item) {
	f.mu.Lock()
	f.written = append(f.written, it)
	f.mu.Unlock()
}

func (f *faultTable) writes() []store.Item {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Item(nil), f.written...)
}

func (f *faultTable) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := f.check("get", k); err != nil {
		return store.Item{}, err
	}
	return f.next.Get(ctx, k)
}

func (f *faultTable) Create(ctx context.Context, it store.Item) error {
	if err := f.check("create", it.Key); err != nil {
		return err
	}
	err := f.next.Create(ctx, it)
	if err == nil {
		f.record(it)
	}
	return err
}

func (f *faultTable) Update(ctx context.Context, it store.Item) error {
	if err := f.check("update", it.Key); err != nil {
		return err
	}
	err := f.next.Update(ctx, it)
	if err == nil {
		f.record(it)
	}
	return err
}

func (f *faultTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := f.check("query", store.Key{PK: q.PK}); err != nil {
		return store.Page{}, err
	}
	return f.next.Query(ctx, q)
}

func (f *faultTable) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if err := f.check("batchget", store.Key{}); err != nil {
		return nil, err
	}
	return f.next.BatchGet(ctx, keys)
}

// faultBlobs passes calls through until fail says otherwise, and counts
// the distinct keys put.
type faultBlobs struct {
	next store.Blobs
	mu   sync.Mutex
	fail func(op, key string) error
	keys map[string]bool
}

func (f *faultBlobs) check(op, key string) error {
	f.mu.Lock()
	fn := f.fail
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, key)
}

func (f *faultBlobs) setFail(fn func(op, key string) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *faultBlobs) keysWithPrefix(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range f.keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func (f *faultBlobs) Put(ctx context.Context, key string, b store.Blob) error {
	if err := f.check("put", key); err != nil {
		return err
	}
	err := f.next.Put(ctx, key, b)
	if err == nil {
		f.mu.Lock()
		if f.keys == nil {
			f.keys = map[string]bool{}
		}
		f.keys[key] = true
		f.mu.Unlock()
	}
	return err
}

func (f *faultBlobs) Get(ctx context.Context, key string) (store.Blob, error) {
	if err := f.check("get", key); err != nil {
		return store.Blob{}, err
	}
	return f.next.Get(ctx, key)
}

func (f *faultBlobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	if err := f.check("head", key); err != nil {
		return store.BlobInfo{}, err
	}
	return f.next.Head(ctx, key)
}

// pngB64 is a w x h PNG of seeded noise, as base64: distinct seeds give
// distinct images.
func pngB64(t testing.TB, seed uint64, w, h int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// msg decodes one pi message from JSON.
func msg(t testing.TB, js string) pi.Message {
	t.Helper()
	var m pi.Message
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	return m
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// imageMsg is a user message: text, then one image block per b64.
func imageMsg(t testing.TB, text string, b64s ...string) pi.Message {
	t.Helper()
	blocks := []string{`{"type":"text","text":` + jsonString(text) + `}`}
	for _, b := range b64s {
		blocks = append(blocks, `{"type":"image","mimeType":"image/png","data":"`+b+`"}`)
	}
	return msg(t, `{"role":"user","content":[`+strings.Join(blocks, ",")+`]}`)
}

// all reads every entry of the fixture's chat.
func (f *fixture) all(t testing.TB) []Entry {
	t.Helper()
	ctx := context.Background()
	n, err := f.log.Len(ctx, f.cur(tenant, chat))
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	es, err := f.log.Entries(ctx, f.cur(tenant, chat), 0, n)
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	if int64(len(es)) != n {
		t.Fatalf("Entries(0, %d) returned %d entries", n, len(es))
	}
	for i, e := range es {
		if e.I != int64(i) {
			t.Fatalf("entry %d has id %d", i, e.I)
		}
	}
	return es
}

// entryRows lists the entry rows written, in the order they were written.
func (f *fixture) entryRows() []store.Item {
	var out []store.Item
	for _, it := range f.table.writes() {
		if strings.HasPrefix(it.SK, store.EntryPrefix) {
			out = append(out, it)
		}
	}
	return out
}

func texts(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind + "|" + e.Text
	}
	return out
}

func (f *faultBlobs) Delete(ctx context.Context, key string) error {
	if err := f.check("delete", key); err != nil {
		return err
	}
	return f.next.Delete(ctx, key)
}

func (f *faultBlobs) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := f.check("list", prefix); err != nil {
		return nil, err
	}
	return f.next.List(ctx, prefix, after, limit)
}

func (f *faultTable) Delete(ctx context.Context, k store.Key, version int64) error {
	if err := f.check("delete", k); err != nil {
		return err
	}
	return f.next.Delete(ctx, k, version)
}
