package hooks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
)

// memImages is an in-memory image store for fuzzing, where a backend round
// trip per input would be too slow.
type memImages struct {
	mu sync.Mutex
	m  map[string]images.Image
}

func (s *memImages) PutPrepared(_ context.Context, tenant string, p images.Prepared) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[tenant+"/"+p.Name] = images.Image{Name: p.Name, MimeType: p.MimeType, Data: p.Data}
	return nil
}

func (s *memImages) Get(_ context.Context, tenant, name string) (images.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.m[tenant+"/"+name]
	if !ok {
		return images.Image{}, store.ErrNotFound
	}
	return img, nil
}

func (s *memImages) Head(ctx context.Context, tenant, name string) (store.BlobInfo, error) {
	img, err := s.Get(ctx, tenant, name)
	return store.BlobInfo{ContentType: img.MimeType, Size: int64(len(img.Data))}, err
}

// Description describes every stored image with text that JSON must
// escape, so a described ref is fuzzed too.
func (s *memImages) Description(ctx context.Context, tenant, name string) (string, error) {
	if _, err := s.Get(ctx, tenant, name); err != nil {
		return "", err
	}
	return `a "quoted" <tag> & \ backslash`, nil
}

// Locate finds stored images only: the fuzzed store has no uploads.
func (s *memImages) Locate(ctx context.Context, tenant, name string) (bool, error) {
	return true, s.Claim(ctx, tenant, name)
}

// Claim claims stored images only: the fuzzed store has no uploads.
func (s *memImages) Claim(ctx context.Context, tenant, name string) error {
	if _, err := s.Get(ctx, tenant, name); err != nil {
		return fmt.Errorf("%s: %w", name, images.ErrNotUploaded)
	}
	return nil
}

type fakeLinker struct{}

func (fakeLinker) URL(_ context.Context, key string, _ store.LinkChat, _ time.Duration) (string, error) {
	return "https://images.example.test/" + key, nil
}

// fuzzHandler serves the hooks on memImages holding one image.
func fuzzHandler(f *testing.F) (http.Handler, string) {
	mem := &memImages{m: map[string]images.Image{}}
	p, err := images.Shrink(context.Background(), pngB64(f, 1, 4, 4))
	if err != nil {
		f.Fatal(err)
	}
	name := p.Name
	if err := mem.PutPrepared(context.Background(), tenantA, p); err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	NewOffload(mem, lifecycle.New(lifecycle.Config{Table: storefake.NewTable(), Blobs: storefake.NewBlobs()})).Register(mux)
	NewRestore(mem, fakeLinker{}).Register(mux)
	return mux, name
}

func serve(t *testing.T, h http.Handler, route string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/chats/c/"+route, strings.NewReader(string(body)))
	r = r.WithContext(api.WithTenant(r.Context(), tenantA))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkAnswer: a well-formed request is answered 200 with valid JSON
// (UTF-8 throughout, as JSON text is), anything else 400.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, field string) {
	switch w.Code {
	case http.StatusOK:
		if !utf8.Valid(w.Body.Bytes()) {
			t.Fatalf("200 with bytes that are not UTF-8: %q", w.Body)
		}
		var answer map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("200 with invalid JSON: %v", err)
		}
		if !json.Valid(answer[field]) {
			t.Fatalf("200 without a valid %s: %s", field, w.Body)
		}
	case http.StatusBadRequest:
	default:
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

func fuzzRestore(f *testing.F, format string, seeds ...string) {
	h, name := fuzzHandler(f)
	ref := fmt.Sprintf("[image %s]", name)
	for _, s := range seeds {
		f.Add(strings.ReplaceAll(s, "REF", ref), int64(4_500_000), false)
		f.Add(strings.ReplaceAll(s, "REF", ref), int64(0), true)
		f.Add(strings.ReplaceAll(s, "REF", ref), int64(-1), true)
	}
	f.Fuzz(func(t *testing.T, req string, budget int64, url bool) {
		mode := ModeInline
		switch {
		case url && budget < 0:
			// A budget is invalid with it, and describe mode ignores it.
			mode, budget = ModeDescribe, 0
		case url:
			mode = ModeURL
		}
		body := fmt.Sprintf(`{"format":%q,"mode":%q,"budgetBytes":%d,"request":%s}`, format, mode, budget, req)
		checkAnswer(t, serve(t, h, "hooks/before-request", []byte(body)), "request")
	})
}

func FuzzRestorePi(f *testing.F) {
	fuzzRestore(f, FormatPi,
		`{"messages":[{"role":"user","content":"REF"}]}`,
		`{"systemPrompt":"s","messages":[{"role":"user","content":[{"type":"text","text":"REF"},{"type":"image","data":"AA=="}]},{"role":"toolResult","content":[{"type":"text","text":"REF","x":1}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"text","text":"REF"}]}]}`,
	)
}

func FuzzRestoreAnthropic(f *testing.F) {
	fuzzRestore(f, FormatAnthropic,
		`{"model":"m","messages":[{"role":"user","content":"REF"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"REF","cache_control":{"type":"ephemeral"}},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"REF"}]},{"type":"tool_result","content":"REF"}]}]}`,
	)
}

func FuzzRestoreBedrock(f *testing.F) {
	fuzzRestore(f, FormatBedrock,
		`{"messages":[{"role":"user","content":[{"text":"REF"},{"toolResult":{"toolUseId":"t","content":[{"text":"REF"},{"json":{}}]}}]}]}`,
		`{"messages":[{"role":"user","content":[{"image":{"format":"png","source":{"bytes":"AA=="}}}]}]}`,
	)
}

func FuzzRestoreOpenAI(f *testing.F) {
	fuzzRestore(f, FormatOpenAI,
		`{"model":"m","messages":[{"role":"system","content":"REF"},{"role":"user","content":[{"type":"text","text":"REF"}]},{"role":"tool","tool_call_id":"t","content":"REF"}]}`,
		`{"messages":[{"role":"user","content":"REF"},{"role":"tool","content":[{"type":"text","text":"REF"}]}]}`,
	)
}

func FuzzAfterTool(f *testing.F) {
	h, name := fuzzHandler(f)
	img := pngB64(f, 2, 4, 4)
	f.Add(`{"call":{"name":"t"},"result":{"content":[{"type":"text","text":"x"},{"type":"image","data":"` + img + `","mimeType":"image/png"}]}}`)
	f.Add(`{"call":{"name":"zoom"},"result":{"content":[{"type":"image","data":"` + img + `","name":"` + name + `"}]},"bounds":{"maxBytes":10}}`)
	f.Add(`{"call":{"nested":true},"result":{"content":"text"}}`)
	f.Add(`{"call":{},"result":{"content":[{"type":"image","data":"` + base64.StdEncoding.EncodeToString([]byte("GIF89a")) + `"}]}}`)
	f.Add("{\"call\":{\"name\":\"t\"},\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe x\"}]}}")
	f.Fuzz(func(t *testing.T, body string) {
		checkAnswer(t, serve(t, h, "hooks/after-tool", []byte(body)), "result")
	})
}
