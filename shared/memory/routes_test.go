package memory

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// serve calls one route of f's memory.
func (f *fixture) serve(t *testing.T, method, path string, body any) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	mux := http.NewServeMux()
	f.m.Register(mux)
	var rd *bytes.Reader
	if s, ok := body.(string); ok {
		rd = bytes.NewReader([]byte(s))
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	req = req.WithContext(api.WithTenant(req.Context(), f.tenant))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec, out
}

func resultText(t *testing.T, out map[string]any) (string, bool) {
	t.Helper()
	content, _ := out["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %v", out)
	}
	first := content[0].(map[string]any)
	isErr, _ := out["isError"].(bool)
	return first["text"].(string), isErr
}

func TestViewRouteAnswersTheContractFields(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "hello")
	f.deliverAll(t)
	rec, out := f.serve(t, "GET", "/v1/chats/c1/view?wait=turn", nil)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	for _, k := range []string{"view", "lines", "bytes", "unbuilt", "retrying", "stalled", "lastError"} {
		if _, ok := out[k]; !ok {
			t.Errorf("answer lacks %q", k)
		}
	}
	if out["view"] != "<chat>\n0+1|user: hello\n</chat>" {
		t.Errorf("view %q", out["view"])
	}
	if rec, _ := f.serve(t, "GET", "/v1/chats/c1/view?wait=forever", nil); rec.Code != 400 || !strings.Contains(rec.Body.String(), `"field":"wait"`) {
		t.Errorf("bad wait: %d %s", rec.Code, rec.Body)
	}
	if rec, _ := f.serve(t, "GET", "/v1/chats/bad%20id/view", nil); rec.Code != 400 {
		t.Errorf("bad chat id: %d", rec.Code)
	}
}

func TestViewWaitEndsWhenTheMemoryStalls(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		return Compacted{}, &model.Error{Retryable: true, Err: errors.New("model down")}
	}
	f.m.wait = time.Minute // a wait that ends at the stall, not at its bound
	f.append(t, "user", long(0))
	f.deliverAll(t)
	start := time.Now()
	rec, out := f.serve(t, "GET", "/v1/chats/c1/view?wait=turn", nil)
	if rec.Code != 200 || out["stalled"] != true || out["unbuilt"].(float64) != 1 || out["retrying"].(float64) != 1 {
		t.Fatalf("answer %v", out)
	}
	if !strings.Contains(out["lastError"].(string), "model down") || !strings.Contains(out["view"].(string), Placeholder) {
		t.Errorf("answer %v", out)
	}
	if took := time.Since(start); took > f.m.wait/2 {
		t.Errorf("a stalled memory kept the turn waiting %s", took)
	}
}

func TestViewWaitEndsWhenABuildInAnotherProcessFinishes(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", long(0))
	go func() {
		time.Sleep(150 * time.Millisecond)
		f.deliverAll(t)
	}()
	rec, out := f.serve(t, "GET", "/v1/chats/c1/view?wait=turn", nil)
	if rec.Code != 200 || out["unbuilt"].(float64) != 0 || out["stalled"] != false {
		t.Fatalf("answer %v", out)
	}
}

func TestStoreOutageIsA503WithRetryAfter(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "x")
	f.table.setFail(func(op string, k store.Key) error { return store.Unavailable(op, errors.New("dynamodb down")) })
	for _, path := range []string{"/v1/chats/c1/view", "/v1/chats/c1/status"} {
		rec, _ := f.serve(t, "GET", path, nil)
		if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s during an outage: %d, Retry-After %q", path, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
}

func TestZoomChecksItsArguments(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 10; i++ {
		f.append(t, "user", fmt.Sprintf("m%d", i))
	}
	f.deliverAll(t)
	tests := []struct {
		body string
		want string
	}{
		{`{}`, "needs an id"},
		{`{"id": 3, "n": 3}`, "not a power of two"},
		{`{"id": 3, "n": 2}`, "not a multiple of n"},
		{`{"id": 8, "n": 4}`, "ends past the log"},
		{`{"id": 10}`, "ends past the log"},
		{`{"id": -1}`, "negative"},
		{`{"id": 0, "n": 2, "offset": 5}`, "offset and limit page one entry"},
		{`{"id": 1, "offset": 100}`, "past the end"},
		{`{"id": 1, "limit": 0}`, "at least 1"},
	}
	for _, tt := range tests {
		rec, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", tt.body)
		if rec.Code != 200 {
			t.Errorf("%s: status %d", tt.body, rec.Code)
			continue
		}
		text, isErr := resultText(t, out)
		if !isErr || !strings.Contains(text, tt.want) {
			t.Errorf("%s: %q (isError %v), want an error saying %q", tt.body, text, isErr, tt.want)
		}
	}
	if rec, _ := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", `{"id": "x"}`); rec.Code != 400 || !strings.Contains(rec.Body.String(), "id") {
		t.Errorf("non-numeric id: %d %s", rec.Code, rec.Body)
	}
	// Numbers written as strings are read.
	if _, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", `{"id": "4", "n": "2"}`); out["isError"] == true {
		t.Errorf("string numbers: %v", out)
	}
}

func TestZoomOpensBlocksAndOriginals(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 4; i++ {
		f.append(t, "user", fmt.Sprintf("m%d", i))
	}
	f.append(t, "user", "m4")
	f.deliverAll(t)
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0, "n": 4})
	text, _ := resultText(t, out)
	if !strings.HasPrefix(text, "0+2|user: m0 user: m1\n2+2|user: m2 user: m3\n") {
		t.Errorf("zoom 0+4 = %q", text)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 2})
	if text, _ := resultText(t, out); text != "user: m2" {
		t.Errorf("zoom 2 = %q", text)
	}
	// Children not built yet say so.
	f.append(t, "user", long(5))
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 4, "n": 2})
	if text, _ := resultText(t, out); !strings.Contains(text, "5+1|not summarized yet") {
		t.Errorf("zoom 4+2 = %q", text)
	}
}

func TestZoomPagesALongEntryWithATrailer(t *testing.T) {
	f := newFixture(t)
	text := strings.Repeat("é", PageChars+100) // two pages, in characters
	f.append(t, "echo", text)
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0})
	page, _ := resultText(t, out)
	body, trailer, _ := strings.Cut(page, "\n[page:")
	total := PageChars + 100 + len("echo: ")
	if len([]rune(body)) != PageChars || !strings.Contains(trailer, fmt.Sprintf("offset=%d", PageChars)) || !strings.Contains(trailer, fmt.Sprint(total)) {
		t.Fatalf("first page %d characters, trailer %q", len([]rune(body)), trailer)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0, "offset": PageChars})
	page, _ = resultText(t, out)
	body, _, _ = strings.Cut(page, "\n[page:")
	if len([]rune(body)) != total-PageChars {
		t.Errorf("second page %d characters", len([]rune(body)))
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0, "offset": 10, "limit": 5})
	page, _ = resultText(t, out)
	if !strings.HasPrefix(page, "éééé") || !strings.Contains(page, "offset=15") {
		t.Errorf("small page %q", page[:40])
	}
}

func TestZoomCarriesThePageImagesUnderTheirNames(t *testing.T) {
	f := imageFixture(t)
	f.append(t, "user", "two: "+refs.Ref(kept)+" "+refs.Ref(missing))
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0})
	content := out["content"].([]any)
	if len(content) != 2 {
		t.Fatalf("content %v", content)
	}
	text := content[0].(map[string]any)["text"].(string)
	if !strings.Contains(text, refs.Ref(missing)) || !strings.Contains(text, "not stored any more") {
		t.Errorf("text %q does not keep and explain the missing ref", text)
	}
	img := content[1].(map[string]any)
	data, _ := base64.StdEncoding.DecodeString(img["data"].(string))
	if img["type"] != "image" || img["name"] != kept || img["mimeType"] != "image/png" || string(data) != "png one" {
		t.Errorf("image block %v", img)
	}
	f.images.setFail(store.Unavailable("get", errors.New("s3 down")))
	if rec, _ := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0}); rec.Code != 503 {
		t.Errorf("zoom during an image outage: %d", rec.Code)
	}
}

func TestDateToolAnswersTheEntryTime(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "a", "b")
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/date", map[string]any{"id": 1})
	if text, isErr := resultText(t, out); isErr || !strings.Contains(text, "2025-01-01T00:01:00Z") {
		t.Errorf("date = %q", text)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/date", map[string]any{"id": 2})
	if text, isErr := resultText(t, out); !isErr || !strings.Contains(text, "outside the log") {
		t.Errorf("date past the end = %q", text)
	}
}

func TestSearchIsOptIn(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "findable")
	rec, out := f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "find"})
	if text, isErr := resultText(t, out); rec.Code != 404 || !isErr || !strings.Contains(text, "memory/settings") {
		t.Fatalf("search off: %d %q", rec.Code, text)
	}
	_, out = f.serve(t, "GET", "/v1/chats/c1/tools", nil)
	if strings.Contains(fmt.Sprint(out), "name:search") {
		t.Errorf("tools list search while it is off")
	}
	if rec, _ := f.serve(t, "PUT", "/v1/chats/c1/memory/settings", map[string]any{"search": true}); rec.Code != 200 {
		t.Fatalf("settings: %d %s", rec.Code, rec.Body)
	}
	_, out = f.serve(t, "GET", "/v1/chats/c1/tools", nil)
	tools := out["tools"].([]any)
	if len(tools) != 3 || tools[2].(map[string]any)["name"] != "search" || tools[2].(map[string]any)["parameters"] == nil {
		t.Errorf("tools = %v", tools)
	}
	if rec, _ := f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "FIND"}); rec.Code != 200 {
		t.Errorf("search on: %d", rec.Code)
	}
}

func TestSearchMatchesOriginalsOnlyTwentyAPageDownTheRanking(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	for i := 0; i < 30; i++ {
		f.append(t, "user", fmt.Sprintf("entry %d mentions the Needle here", i))
	}
	// A logged zoom result that matches is not an original.
	i := f.log.addEntry(f.chat, transcript.Entry{Kind: "echo", Tool: "zoom", Of: 3, Text: "zoom: needle again"})
	if err := f.m.Appended(t.Context(), f.ch(), i+1); err != nil {
		t.Fatal(err)
	}
	f.append(t, "talk", "no match")
	f.deliverAll(t)
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "needle"})
	text, isErr := resultText(t, out)
	if isErr || strings.Count(text, "\nid ") != SearchHits || strings.Contains(text, "needle again") {
		t.Fatalf("first page:\n%s", text)
	}
	if first := strings.Index(text, "id 29 "); first < 0 || first > strings.Index(text, "id 28 ") {
		t.Errorf("equal scores are not newest first:\n%s", text)
	}
	if !strings.Contains(text, "skip=20") {
		t.Errorf("no pointer to the next page:\n%s", text)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "needle", "skip": 20})
	text, _ = resultText(t, out)
	if strings.Count(text, "\nid ") != 10 || strings.Contains(text, "skip=") || !strings.Contains(text, "id 0 ") {
		t.Errorf("second page:\n%s", text)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": " "})
	if _, isErr := resultText(t, out); !isErr {
		t.Errorf("an empty search is not an error")
	}
}

func TestSearchHitShowsTheSummaryLineHoldingIt(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	f.comp.lineLen = 300
	f.append(t, "user", strings.Repeat("pad ", 100)+"the unique word zebra "+strings.Repeat("pad ", 100))
	f.deliverAll(t)
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "ZEBRA"})
	text, _ := resultText(t, out)
	if !strings.Contains(text, "the unique word zebra") || !strings.Contains(text, "in view line 0+1|S0+1") {
		t.Errorf("hit:\n%s", text)
	}
	snippet := text[strings.Index(text, "): ")+3:]
	snippet = snippet[:strings.Index(snippet, "\n")]
	if n := len([]rune(strings.Trim(snippet, "."))); n > SnippetChars {
		t.Errorf("snippet of %d characters", n)
	}
}

func TestStatusShowsTheCounts(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "a", "b", "c")
	f.deliverAll(t)
	rec, out := f.serve(t, "GET", "/v1/chats/c1/status", nil)
	if rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	for k, want := range map[string]float64{"entries": 3, "nodes": 4, "built": 4, "unbuilt": 0, "retrying": 0, "inFlight": 0} {
		if out[k] != want {
			t.Errorf("%s = %v, want %v", k, out[k], want)
		}
	}
	if _, ok := out["mechanical"].([]any); !ok {
		t.Errorf("mechanical is not a list: %v", out["mechanical"])
	}
}

func TestZoomReadsNoMoreImagesThanAProviderTakes(t *testing.T) {
	f := imageFixture(t)
	var text strings.Builder
	for i := range MaxLeafImages + 3 {
		name := fmt.Sprintf("%016x", i+1)
		f.images.imgs[name] = model.Image{MimeType: "image/png", Data: []byte("png")}
		text.WriteString(refs.Ref(name) + " ")
	}
	f.append(t, "user", text.String())
	f.deliverAll(t)
	before := f.images.gets
	_, out := f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0})
	content := out["content"].([]any)
	if len(content) != 1+MaxLeafImages || f.images.gets-before != MaxLeafImages {
		t.Fatalf("zoom carried %d images after %d reads, want %d of each", len(content)-1, f.images.gets-before, MaxLeafImages)
	}
	if page := content[0].(map[string]any)["text"].(string); strings.Count(page, "is not attached") != 3 {
		t.Errorf("the page does not say which 3 images are not attached: %q", page[max(0, len(page)-600):])
	}
}

func TestSearchReadsABoundedAmountOfTextPerCall(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	// 600 entries of 100 KB and no match: 60 MB of text, more than one
	// call reads; the index catches up over a few calls.
	big := strings.Repeat("x", 100_000) + " word"
	for range 600 {
		f.log.add(f.chat, "user", big)
	}
	if err := f.m.Appended(t.Context(), f.ch(), 600); err != nil {
		t.Fatal(err)
	}
	for call := 1; ; call++ {
		_, out := f.serve(t, "POST", "/v1/chats/c1/tools/search", map[string]any{"text": "needle"})
		text, isErr := resultText(t, out)
		if isErr {
			t.Fatalf("search failed:\n%.300s", text)
		}
		segs, err := f.m.markers(t.Context(), f.ch())
		if err != nil {
			t.Fatal(err)
		}
		if read := int(indexedTo(segs)) * len(big); read > call*(searchBytes+segEntries*len(big)) {
			t.Fatalf("after %d calls the index read %d MB of text, want at most about %d MB a call", call, read>>20, searchBytes>>20)
		}
		if call == 1 && !strings.Contains(text, "catching up") {
			t.Fatalf("the first call read all 60 MB, or did not say it did not:\n%.300s", text)
		}
		if !strings.Contains(text, "catching up") {
			break
		}
		if call > 10 {
			t.Fatalf("the index did not catch up in %d calls", call)
		}
	}
}
