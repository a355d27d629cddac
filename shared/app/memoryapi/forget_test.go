package memoryapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/durachat/durachat/shared/testenv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTheForgetToolIsOffUntilTheChatTurnsItOnThenErasesWhatTheModelNames:
// a chat has no forget tool (not listed, not on MCP's tools/list, a 404
// tool result saying how to turn it on) until its memory settings turn it
// on; then the tool is listed (MCP: destructive), a bad entry is a tool
// error, and a call with an entry id erases the whole message holding it,
// as POST .../erase does, answering the receipt in words.
func TestTheForgetToolIsOffUntilTheChatTurnsItOnThenErasesWhatTheModelNames(t *testing.T) {
	b := testenv.Embedded(t)
	stores := app.Stores{Table: b.Table, Blobs: b.Blobs, Linker: b.Linker, Queue: b.Queue, Receiver: b.Receiver}
	a, err := memoryapi.New(config.Config{}, stores, memoryapi.Models{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		r.Register(mux)
	}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req = req.WithContext(api.WithTenant(req.Context(), "t"))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	s, err := mcp.NewServer(a.MCP("t"), mcp.Options{Chat: "c", OptIn: true})
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptest.InMemory(t, s.SDK())
	mcpForget := func() *sdk.Tool {
		t.Helper()
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.Tools, func(tl *sdk.Tool) bool { return tl.Name == "forget" })
		if i < 0 {
			return nil
		}
		return list.Tools[i]
	}

	msgs, _ := json.Marshal(map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "my locker code is 4711-secret", "timestamp": 1718000000000},
		map[string]any{"role": "user", "content": "and the weather is fine", "timestamp": 1718000001000},
	}})
	if code, out := do("POST", "/v1/chats/c/messages", string(msgs)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, out)
	}

	if _, out := do("GET", "/v1/chats/c/tools", ""); strings.Contains(out, `"forget"`) {
		t.Fatalf("forget is listed while off: %s", out)
	}
	if tl := mcpForget(); tl != nil {
		t.Fatal("MCP lists forget while it is off")
	}
	if code, out := do("POST", "/v1/chats/c/tools/forget", `{"entries":[0]}`); code != http.StatusNotFound || !strings.Contains(out, `{\"forget\": true}`) {
		t.Fatalf("forget while off: %d %s", code, out)
	}

	if code, out := do("PUT", "/v1/chats/c/memory/settings", `{"forget":true}`); code != http.StatusOK || out != "{\"forget\":true}\n" {
		t.Fatalf("turning forget on: %d %q", code, out)
	}
	if _, out := do("GET", "/v1/chats/c/tools", ""); !strings.Contains(out, `"forget"`) {
		t.Fatalf("forget is not listed once on: %s", out)
	}
	if tl := mcpForget(); tl == nil || tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint {
		t.Fatalf("MCP forget once on: %+v", tl)
	}

	if code, out := do("POST", "/v1/chats/c/tools/forget", `{"entries":[7]}`); code != http.StatusOK || !strings.Contains(out, `"isError":true`) || !strings.Contains(out, "entry 7") {
		t.Fatalf("an entry outside the log: %d %s", code, out)
	}
	code, out := do("POST", "/v1/chats/c/tools/forget", `{"entries":[0]}`)
	if code != http.StatusOK || strings.Contains(out, `"isError":true`) || !strings.Contains(out, "forgot 1 message(s) (entries 0)") {
		t.Fatalf("forget entry 0: %d %s", code, out)
	}
	if code, out := do("GET", "/v1/chats/c/messages", ""); code != http.StatusOK || strings.Contains(out, "4711") ||
		!strings.Contains(out, `"erased"`) || !strings.Contains(out, "weather") {
		t.Fatalf("read-back after forget: %d %s", code, out)
	}
}
