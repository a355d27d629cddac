package hooks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/testenv"
)

// The tenants the tests call as. The tenant comes from the auth layer; here
// a test-only header stands in for it.
const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

// env is the hooks served over HTTP on one backend, with its image store
// wrapped to count calls and inject faults.
type env struct {
	name   string
	blobs  *faultyBlobs
	images *images.Store
	linker store.Linker
	srv    *httptest.Server
	// chats records the images put for the chat they are put through;
	// table counts the reads restore makes to tell which it names.
	chats *lifecycle.Chats
	table *countingTable
}

// countingTable counts the reads of a table.
type countingTable struct {
	store.Table
	gets, batchGets atomic.Int64
}

func (c *countingTable) Get(ctx context.Context, k store.Key) (store.Item, error) {
	c.gets.Add(1)
	return c.Table.Get(ctx, k)
}

func (c *countingTable) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	c.batchGets.Add(1)
	return c.Table.BatchGet(ctx, keys)
}

// eachBackend runs fn on every backend: embedded and the AWS adapters on
// local AWS-protocol servers.
func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			fn(t, newEnv(t, b))
		})
	}
}

func newEnv(t testing.TB, b testenv.Backend) *env {
	t.Helper()
	fb := &faultyBlobs{Blobs: b.Blobs}
	imgs := images.New(fb)
	mux := http.NewServeMux()
	table := b.Table
	if table == nil { // a backend of blobs alone: the references are not the test's subject
		table = storefake.NewTable()
	}
	chats := lifecycle.New(lifecycle.Config{Table: table, Blobs: fb})
	NewOffload(imgs, chats).Register(mux)
	counted := &countingTable{Table: table}
	rs := NewRestore(imgs, b.Linker)
	rs.Chats = chatid.New(counted)
	rs.Register(mux)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Test-Tenant")
		if tenant == "" {
			tenant = tenantA
		}
		mux.ServeHTTP(w, r.WithContext(api.WithTenant(r.Context(), tenant)))
	}))
	t.Cleanup(srv.Close)
	return &env{name: b.Name, blobs: fb, images: imgs, linker: b.Linker, srv: srv, chats: chats, table: counted}
}

// post sends body (bytes, or anything JSON encodes) to a chat route as tenant.
func (e *env) post(t testing.TB, tenant, route string, body any) (int, []byte) {
	t.Helper()
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chats/chat-1/"+route, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test-Tenant", tenant)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}

// postOK is post that fails the test unless the answer is 200, decoding it into v.
func (e *env) postOK(t testing.TB, tenant, route string, body, v any) {
	t.Helper()
	status, out := e.post(t, tenant, route, body)
	if status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", route, status, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s: answer %s: %v", route, out, err)
	}
}

// wantError checks a 4xx answer naming field, and returns its message.
func wantError(t testing.TB, status int, out []byte, wantStatus int, field string) string {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %s", status, wantStatus, out)
	}
	var e struct {
		Error struct {
			Code, Message, Field string
		}
	}
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("error answer %s: %v", out, err)
	}
	if e.Error.Field != field {
		t.Fatalf("error names field %q, want %q: %s", e.Error.Field, field, out)
	}
	if e.Error.Message == "" {
		t.Fatalf("error without a message: %s", out)
	}
	return e.Error.Message
}

// put stores an image for tenant directly, as another route would have,
// and records it for the chat the tests post to.
func (e *env) put(t testing.TB, tenant, b64 string) string {
	t.Helper()
	return e.putFor(t, tenant, "chat-1", b64)
}

// putFor stores an image of tenant and records it for chat, as a hook
// that stores it for the chat does.
func (e *env) putFor(t testing.TB, tenant, chat, b64 string) string {
	t.Helper()
	name, err := e.images.Put(context.Background(), tenant, b64)
	if err != nil {
		t.Fatal(err)
	}
	e.hold(t, tenant, chat, name)
	return name
}

// hold records names for tenant's chat, stored or not, as a hook that
// stores or claims them for the chat does.
func (e *env) hold(t testing.TB, tenant, chat string, names ...string) {
	t.Helper()
	if _, err := e.chats.Hold(context.Background(), tenant, chat, names, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// stored reports whether tenant has an image of that name.
func (e *env) stored(t testing.TB, tenant, name string) bool {
	t.Helper()
	_, err := e.blobs.Blobs.Head(context.Background(), store.ImageKey(tenant, name))
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// faultyBlobs counts calls and fails or slows the ones a test picks.
type faultyBlobs struct {
	store.Blobs
	puts, gets, heads atomic.Int64

	mu       sync.Mutex
	failPut  func(key string) bool
	failGet  func(key string) bool
	getDelay time.Duration
	got      []string
}

var errInjected = testenv.Outage("image blob")

func (f *faultyBlobs) Put(ctx context.Context, key string, b store.Blob) error {
	f.puts.Add(1)
	f.mu.Lock()
	fail := f.failPut != nil && f.failPut(key)
	f.mu.Unlock()
	if fail {
		return errInjected
	}
	return f.Blobs.Put(ctx, key, b)
}

func (f *faultyBlobs) Get(ctx context.Context, key string) (store.Blob, error) {
	f.gets.Add(1)
	f.mu.Lock()
	f.got = append(f.got, key)
	fail := f.failGet != nil && f.failGet(key)
	delay := f.getDelay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return store.Blob{}, ctx.Err()
		}
	}
	if fail {
		return store.Blob{}, errInjected
	}
	return f.Blobs.Get(ctx, key)
}

func (f *faultyBlobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	f.heads.Add(1)
	f.mu.Lock()
	fail := f.failGet != nil && f.failGet(key)
	f.mu.Unlock()
	if fail {
		return store.BlobInfo{}, errInjected
	}
	return f.Blobs.Head(ctx, key)
}

func (f *faultyBlobs) set(fn func(f *faultyBlobs)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faultyBlobs) keysRead() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// keyHasName matches the blob key of an image name.
func keyHasName(name string) func(string) bool {
	return func(key string) bool { return strings.HasSuffix(key, "/"+name) }
}

// pngB64 is a small PNG, distinct for each seed, as base64.
func pngB64(t testing.TB, seed, w, h int) string {
	t.Helper()
	return base64.StdEncoding.EncodeToString(pngBytes(t, seed, w, h, false))
}

// pngBytes draws a PNG; noisy ones barely compress, for size tests.
func pngBytes(t testing.TB, seed, w, h int, noisy bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	for y := range h {
		for x := range w {
			c := color.NRGBA{uint8(x*7 + seed), uint8(y*13 + seed*3), uint8(seed * 29), 255}
			if noisy {
				c = color.NRGBA{uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// obj is a JSON object literal for building requests.
type obj = map[string]any
type list = []any

func textBlock(s string) obj { return obj{"type": "text", "text": s} }

func imageBlock(b64 string) obj { return obj{"type": "image", "data": b64, "mimeType": "image/png"} }

// jsonEqual compares two JSON texts by meaning.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
