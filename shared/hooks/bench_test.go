package hooks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
)

// slowBlobs adds a delay to every read, standing in for S3's latency over
// an in-memory store, so a benchmark measures the hook and not a disk or a
// network.
type slowBlobs struct {
	store.Blobs
	delay time.Duration
}

func (s slowBlobs) Get(ctx context.Context, key string) (store.Blob, error) {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	return s.Blobs.Get(ctx, key)
}

// fiveMBResult is a tool result of about 5 MB: some text and 4 distinct
// PNGs of about 1.2 MB of base64 each, all within the stored-image limits so
// none is re-encoded.
func fiveMBResult(b *testing.B) []byte {
	content := list{textBlock(strings.Repeat("log line of a tool\n", 500))}
	for i := range 4 {
		content = append(content, imageBlock(base64.StdEncoding.EncodeToString(pngBytes(b, 100+i, 556, 556, true))))
	}
	body, err := json.Marshal(afterTool(obj{"id": "c1", "name": "screenshot"}, content))
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// echoToolResult is the baseline: a handler that only decodes the same
// request into the same block types and writes it back.
func echoToolResult(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Call   toolCall `json:"call"`
		Result struct {
			Content []pi.Block `json:"content"`
			IsError bool       `json:"isError"`
		} `json:"result"`
		Bounds *bounds `json:"bounds"`
	}
	if err := api.DecodeJSON(r, &req); err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"result": req.Result, "stored": []string{}, "inline": []InlineImage{}, "skipped": nil})
	return nil
}

// heapUse runs fn and returns how far the heap rose while it ran, sampled,
// and the bytes fn allocated. The sampled heap holds garbage not yet
// collected, so its peak moves with when the collector runs; what fn
// allocates does not, and bounds that rise from above.
func heapUse(fn func()) (peak, allocated uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	read := func() (heap, allocs uint64) {
		metrics.Read(sample)
		return sample[0].Value.Uint64(), sample[1].Value.Uint64()
	}
	runtime.GC()
	start, allocsBefore := read()
	var top atomic.Uint64
	note := func() {
		if v, _ := read(); v > top.Load() {
			top.Store(v)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Microsecond)
		defer tick.Stop()
		for {
			note()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	_, allocsAfter := read()
	close(stop)
	<-done
	note()
	return max(top.Load(), start) - start, allocsAfter - allocsBefore
}

func benchAfterTool(b *testing.B, h http.Handler) {
	body := fiveMBResult(b)
	run := func() {
		r := httptest.NewRequest(http.MethodPost, "/v1/chats/c/hooks/after-tool", bytes.NewReader(body))
		r = r.WithContext(api.WithTenant(r.Context(), tenantA))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %.300s", w.Code, w.Body)
		}
	}
	run()
	peak, _ := heapUse(run)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(peak)/float64(len(body)), "peak/payload")
}

// BenchmarkAfterTool5MB offloads the 4 images of a 5 MB result into an
// in-memory image store (every run puts the same images: a create-once
// no-op after the first, as in a retried hook).
func BenchmarkAfterTool5MB(b *testing.B) {
	mux := http.NewServeMux()
	blobs := storefake.NewBlobs()
	NewOffload(images.New(blobs), lifecycle.New(lifecycle.Config{Table: storefake.NewTable(), Blobs: blobs})).Register(mux)
	benchAfterTool(b, mux)
}

func BenchmarkAfterTool5MBBaseline(b *testing.B) {
	mux := http.NewServeMux()
	api.Handle(mux, "POST /v1/chats/{chat}/hooks/after-tool", echoToolResult)
	benchAfterTool(b, mux)
}

// readLatency is what the image store adds to every read in the restore
// benchmarks.
const readLatency = 20 * time.Millisecond

func benchBeforeRequest(b *testing.B, parallel int, latency time.Duration) {
	blobs := storefake.NewBlobs()
	imgs := images.New(blobs)
	var names []string
	for i := range 5 {
		name, err := imgs.Put(context.Background(), tenantA, base64.StdEncoding.EncodeToString(pngBytes(b, 200+i, 160, 160, true)))
		if err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	imgs = images.New(slowBlobs{Blobs: blobs, delay: latency})
	var content list
	for i := range 20 {
		content = append(content, textBlock(refs.Ref(names[i%5])))
	}
	body, _ := json.Marshal(restoreBody(FormatAnthropic, obj{"model": "m", "max_tokens": 100, "messages": list{
		obj{"role": "user", "content": content[:10]},
		obj{"role": "assistant", "content": "ok"},
		obj{"role": "user", "content": list{obj{"type": "tool_result", "tool_use_id": "t", "content": content[10:]}}},
	}}))
	rs := NewRestore(imgs, nil)
	rs.Parallel = parallel
	mux := http.NewServeMux()
	rs.Register(mux)
	const path = "/v1/chats/c/hooks/before-request"
	// The answer is checked once, outside the timed loop, so the loop
	// times the hook and not the check.
	if w := post(b, mux, path, body); bytes.Contains(w.Body.Bytes(), []byte(`"unrestored":[{`)) {
		b.Fatalf("not all restored: %.300s", w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		post(b, mux, path, body)
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(readLatency), "x-read-latency")
}

// BenchmarkBeforeRequest20Refs5Images restores 20 ref blocks naming 5
// images from a store that takes 20 ms a read: reads are deduplicated and
// run in parallel.
func BenchmarkBeforeRequest20Refs5Images(b *testing.B) {
	benchBeforeRequest(b, DefaultParallel, readLatency)
}

// BenchmarkBeforeRequest20Refs5ImagesSequential is the baseline: the same
// restore reading one image at a time.
func BenchmarkBeforeRequest20Refs5ImagesSequential(b *testing.B) {
	benchBeforeRequest(b, 1, readLatency)
}

// BenchmarkBeforeRequest20Refs5ImagesNoLatency is the copy time: the same
// restore from a store that answers at once (an answer of 2,057,044 bytes,
// nearly all of it the images' base64).
func BenchmarkBeforeRequest20Refs5ImagesNoLatency(b *testing.B) {
	benchBeforeRequest(b, DefaultParallel, 0)
}

// Store latencies for the benchmarks of what recording references costs:
// about what DynamoDB and S3 take for a small call in one Region.
const (
	tableLatency = 5 * time.Millisecond
	blobLatency  = 20 * time.Millisecond
)

// slowTable adds a delay to every call of a table, and counts the calls.
type slowTable struct {
	store.Table
	delay time.Duration
	calls *atomic.Int64
}

func (s slowTable) wait() {
	s.calls.Add(1)
	time.Sleep(s.delay)
}

func (s slowTable) Get(ctx context.Context, k store.Key) (store.Item, error) {
	s.wait()
	return s.Table.Get(ctx, k)
}

func (s slowTable) Create(ctx context.Context, it store.Item) error {
	s.wait()
	return s.Table.Create(ctx, it)
}

func (s slowTable) Update(ctx context.Context, it store.Item) error {
	s.wait()
	return s.Table.Update(ctx, it)
}

func (s slowTable) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	s.wait()
	return s.Table.BatchGet(ctx, keys)
}

// slowAllBlobs adds a delay to every read and write of blobs.
type slowAllBlobs struct {
	store.Blobs
	delay time.Duration
}

func (s slowAllBlobs) Put(ctx context.Context, key string, b store.Blob) error {
	time.Sleep(s.delay)
	return s.Blobs.Put(ctx, key, b)
}

func (s slowAllBlobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	time.Sleep(s.delay)
	return s.Blobs.Head(ctx, key)
}

// noReferences records nothing: the hook as it was before it recorded its
// images for their chats, the baseline of the benchmarks below.
type noReferences struct{}

func (noReferences) Hold(ctx context.Context, _, _ string, _ []string, store func(context.Context) error) (chatid.Chat, error) {
	if store == nil {
		return chatid.Chat{}, nil
	}
	return chatid.Chat{}, store(ctx)
}

// benchAfterToolLatency runs after-tool on the 5 MB result over stores
// with latency. With newChat, each run is for a chat that has not named
// the images yet (its references are written); else the same chat again
// (they are read).
func benchAfterToolLatency(b *testing.B, record, newChat bool) {
	blobs := slowAllBlobs{Blobs: storefake.NewBlobs(), delay: blobLatency}
	var refs References = noReferences{}
	var calls atomic.Int64
	if record {
		refs = lifecycle.New(lifecycle.Config{Table: slowTable{Table: storefake.NewTable(), delay: tableLatency, calls: &calls}, Blobs: blobs})
	}
	mux := http.NewServeMux()
	NewOffload(images.New(blobs), refs).Register(mux)
	body := fiveMBResult(b)
	n := 0
	run := func() {
		chat := "c"
		if newChat {
			n++
			chat = fmt.Sprint("c", n)
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/chats/"+chat+"/hooks/after-tool", bytes.NewReader(body))
		r = r.WithContext(api.WithTenant(r.Context(), tenantA))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %.300s", w.Code, w.Body)
		}
	}
	run() // the images are stored from here on, as for a retried hook
	calls.Store(0)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(blobLatency), "x-blob-latency")
	b.ReportMetric(float64(calls.Load())/float64(b.N), "table-calls/op")
}

// BenchmarkAfterTool5MBLatencyRecorded: the chat names the images
// already, so recording them is one batch read.
func BenchmarkAfterTool5MBLatencyRecorded(b *testing.B) { benchAfterToolLatency(b, true, false) }

// BenchmarkAfterTool5MBLatencyRecordedNewChat: each run's chat is new to
// the images, so their references are written (and the chat indexed).
func BenchmarkAfterTool5MBLatencyRecordedNewChat(b *testing.B) {
	benchAfterToolLatency(b, true, true)
}

// BenchmarkAfterTool5MBLatencyBaseline is the hook recording nothing.
func BenchmarkAfterTool5MBLatencyBaseline(b *testing.B) { benchAfterToolLatency(b, false, false) }
