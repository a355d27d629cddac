package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// countingLinker counts the links it makes.
type countingLinker struct{ n atomic.Int64 }

func (c *countingLinker) URL(ctx context.Context, key string, chat store.LinkChat, ttl time.Duration) (string, error) {
	c.n.Add(1)
	return fakeLinker{}.URL(ctx, key, chat, ttl)
}

// countingImages counts the reads of memImages.
type countingImages struct {
	*memImages
	gets atomic.Int64
}

func (c *countingImages) Get(ctx context.Context, tenant, name string) (images.Image, error) {
	c.gets.Add(1)
	return c.memImages.Get(ctx, tenant, name)
}

// limitEnv serves before-request over one stored image.
func limitEnv(t testing.TB) (http.Handler, *countingImages, *countingLinker, string) {
	mem := &countingImages{memImages: &memImages{m: map[string]images.Image{}}}
	p, err := images.Shrink(context.Background(), pngB64(t, 1, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.PutPrepared(context.Background(), tenantA, p); err != nil {
		t.Fatal(err)
	}
	linker := &countingLinker{}
	mux := http.NewServeMux()
	NewRestore(mem, linker).Register(mux)
	return mux, mem, linker, p.Name
}

// repeatedRefs is a request of the format with one user message of n ref
// blocks: the last (newest) `missing` name images never stored, the rest
// name.
func repeatedRefs(format string, n, missing int, name string) string {
	ref := func(i int) string {
		if i >= n-missing {
			return refs.Ref(fmt.Sprintf("%016x", n-i))
		}
		return refs.Ref(name)
	}
	var blocks []string
	for i := range n {
		if format == FormatBedrock {
			blocks = append(blocks, fmt.Sprintf(`{"text":%q}`, ref(i)))
		} else {
			blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":%q}`, ref(i)))
		}
	}
	return fmt.Sprintf(`{"messages":[{"role":"user","content":[%s]}]}`, strings.Join(blocks, ","))
}

func TestRestoredImagesStayWithinTheProviderLimit(t *testing.T) {
	tests := []struct {
		format string
		mode   string
		limit  int
	}{
		{FormatAnthropic, ModeInline, 100},
		{FormatAnthropic, ModeURL, 100},
		{FormatBedrock, ModeInline, 20},
		{FormatOpenAI, ModeURL, 500},
		{FormatPi, ModeInline, 20},
	}
	for _, tt := range tests {
		t.Run(tt.format+" "+tt.mode, func(t *testing.T) {
			h, mem, linker, name := limitEnv(t)
			const missing = 3
			req := repeatedRefs(tt.format, tt.limit+50, missing, name)
			body := fmt.Sprintf(`{"format":%q,"mode":%q,"request":%s}`, tt.format, tt.mode, req)
			w := serve(t, h, "hooks/before-request", []byte(body))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var a restoreAnswerT
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatal(err)
			}
			// Every ref still text is listed once per name and reason.
			want := map[Unrestored]bool{{Name: name, Reason: ReasonLimit}: true}
			for i := range missing {
				want[Unrestored{Name: fmt.Sprintf("%016x", i+1), Reason: ReasonNotFound}] = true
			}
			if len(a.Unrestored) != len(want) {
				t.Errorf("unrestored = %v, want %v", a.Unrestored, want)
			}
			for _, u := range a.Unrestored {
				if !want[u] {
					t.Errorf("unrestored %v not expected", u)
				}
			}
			restoredImages := strings.Count(string(a.Request), `"type":"image_url"`) + strings.Count(string(a.Request), `"type":"image"`) + strings.Count(string(a.Request), `{"image":`)
			if restoredImages != tt.limit {
				t.Errorf("%d images restored, want the provider's limit %d", restoredImages, tt.limit)
			}
			if refsLeft := strings.Count(string(a.Request), "[image "); refsLeft != 50 {
				t.Errorf("%d refs left as text, want %d", refsLeft, 50)
			}
			if got := mem.gets.Load(); tt.mode == ModeInline && got != missing+1 {
				t.Errorf("%d reads, want one per distinct name (%d)", got, missing+1)
			}
			if got := linker.n.Load(); got > 1 {
				t.Errorf("%d links made, want at most one per name", got)
			}
		})
	}
}

func TestImagesAlreadyInTheRequestCountTowardTheLimit(t *testing.T) {
	h, _, _, name := limitEnv(t)
	var blocks []string
	for range MaxImagesBedrock - 2 {
		blocks = append(blocks, `{"image":{"format":"png","source":{"bytes":"AAAA"}}}`)
	}
	for range 5 {
		blocks = append(blocks, fmt.Sprintf(`{"text":%q}`, refs.Ref(name)))
	}
	req := fmt.Sprintf(`{"messages":[{"role":"user","content":[%s]}]}`, strings.Join(blocks, ","))
	w := serve(t, h, "hooks/before-request", []byte(`{"format":"bedrock","request":`+req+`}`))
	var a restoreAnswerT
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(a.Request), `"image"`); n != MaxImagesBedrock {
		t.Errorf("%d images in the request, want %d", n, MaxImagesBedrock)
	}
	if len(a.Unrestored) != 1 || a.Unrestored[0].Reason != ReasonLimit {
		t.Errorf("unrestored = %v, want the ref with reason limit", a.Unrestored)
	}
}

func TestRepeatedRefsCostTheDistinctImagesNotTheBlocks(t *testing.T) {
	// A 9 MiB request naming one image in every one of its blocks: the
	// answer and the memory restore takes stay near the request's size.
	h, mem, linker, name := limitEnv(t)
	n := (9 << 20) / len(fmt.Sprintf(`{"type":"text","text":%q},`, refs.Ref(name)))
	req := repeatedRefs(FormatAnthropic, n, 0, name)
	body := []byte(`{"format":"anthropic","mode":"url","request":` + req + `}`)
	// The body is sent as it is and the answer counted, not kept: the
	// test's own copies are no part of what restore takes.
	w := &countingWriter{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/v1/chats/c/hooks/before-request", bytes.NewReader(body))
	r = r.WithContext(api.WithTenant(r.Context(), tenantA))
	peak, allocated := heapUse(func() { h.ServeHTTP(w, r) })
	if w.status != http.StatusOK {
		t.Fatalf("status %d", w.status)
	}
	t.Logf("%d ref blocks, request %d KB, answer %d KB, allocated %d MB, sampled peak heap %d MB", n, len(body)>>10, w.n>>10, allocated>>20, peak>>20)
	if w.n > len(body)+MaxImagesAnthropic*200 {
		t.Errorf("answer of %d bytes for a request of %d", w.n, len(body))
	}
	if got := linker.n.Load() + mem.gets.Load(); got > 1 {
		t.Errorf("%d reads and links for one distinct image", got)
	}
	// The heap cannot rise by more than what the call allocates, however
	// the collector's cycles fall; the sampled peak, which counts garbage
	// not yet collected, moves with them.
	if limit := uint64(6 * len(body)); allocated > limit {
		t.Errorf("%d MB allocated, want at most %d MB", allocated>>20, limit>>20)
	}
}

// countingWriter is a ResponseWriter that counts the answer's bytes and
// keeps none of them.
type countingWriter struct {
	header http.Header
	status int
	n      int
}

func (c *countingWriter) Header() http.Header { return c.header }

func (c *countingWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	c.n += len(p)
	return len(p), nil
}
