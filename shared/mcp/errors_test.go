package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app/local/localtest"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every way a tool call fails, on every tool, carries durachat's error
// code: in the tool error's structured content ({"error":{"code":...}})
// and at the start of its text, as the HTTP API answers the same call;
// a call the SDK refuses before a tool answers (a tool the server does
// not have) carries it in the JSON-RPC error's data and message.
func TestEveryToolErrorCarriesDurachatsErrorCode(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), map[string]string{config.EnvTokens: aliceToken + "=alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := connect(ctx, srv.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	one := []any{map[string]any{"role": "user", "content": "the first message"}}
	for _, chat := range []string{"errs", "on"} {
		if _, err := mcptest.Call(ctx, cs, "log", map[string]any{"chat": chat, "receipt": "r1", "messages": one}); err != nil {
			t.Fatal(err)
		}
	}
	// Chat "on" has the opt-in tools on.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/v1/chats/on/memory/settings", strings.NewReader(`{"search":true,"forget":true}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.Body.Close() != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("turning the opt-in tools on: %v %v", resp, err)
	}

	for _, c := range []struct {
		name, tool string
		args       map[string]any
		code       string
	}{
		{"view without a chat", "view", map[string]any{}, "bad_request"},
		{"view of a bad chat id", "view", map[string]any{"chat": "no/such"}, "bad_request"},
		{"view with wait of the wrong type", "view", map[string]any{"chat": "errs", "wait": "yes"}, "bad_request"},
		{"log without a chat", "log", map[string]any{"messages": one}, "bad_request"},
		{"log without messages", "log", map[string]any{"chat": "errs"}, "bad_request"},
		{"log of a message without a role", "log", map[string]any{"chat": "errs", "messages": []any{map[string]any{"content": "x"}}}, "bad_request"},
		{"log under a receipt used for other messages", "log", map[string]any{"chat": "errs", "receipt": "r1",
			"messages": []any{map[string]any{"role": "user", "content": "another message"}}}, "conflict"},
		{"zoom of a bad chat id", "zoom", map[string]any{"chat": "../x", "id": 0}, "bad_request"},
		{"zoom without an id", "zoom", map[string]any{"chat": "errs"}, "bad_request"},
		{"zoom with an id of the wrong type", "zoom", map[string]any{"chat": "errs", "id": "first"}, "bad_request"},
		{"zoom with n not a power of two", "zoom", map[string]any{"chat": "errs", "id": 0, "n": 3}, "bad_request"},
		{"zoom with a negative id", "zoom", map[string]any{"chat": "errs", "id": -1}, "bad_request"},
		{"zoom past the log", "zoom", map[string]any{"chat": "errs", "id": 8}, "bad_request"},
		{"zoom with an offset past the entry", "zoom", map[string]any{"chat": "errs", "id": 0, "offset": 1 << 20}, "bad_request"},
		{"date without an id", "date", map[string]any{"chat": "errs"}, "bad_request"},
		{"date past the log", "date", map[string]any{"chat": "errs", "id": 5}, "bad_request"},
		{"date of a bad chat id", "date", map[string]any{"chat": "", "id": 0}, "bad_request"},
		{"search while it is off", "search", map[string]any{"chat": "errs", "text": "first"}, "not_found"},
		{"search of a bad chat id", "search", map[string]any{"chat": "a b", "text": "first"}, "bad_request"},
		{"search without text", "search", map[string]any{"chat": "on"}, "bad_request"},
		{"search with a negative skip", "search", map[string]any{"chat": "on", "text": "first", "skip": -1}, "bad_request"},
		{"search before an entry past the log", "search", map[string]any{"chat": "on", "text": "first", "before": 99}, "bad_request"},
		{"search of no word", "search", map[string]any{"chat": "on", "text": "!!"}, "bad_request"},
		{"forget of nothing", "forget", map[string]any{"chat": "on"}, "bad_request"},
		{"forget of too short a match", "forget", map[string]any{"chat": "on", "match": "ab"}, "bad_request"},
		{"forget of an entry past the log", "forget", map[string]any{"chat": "on", "entries": []int{42}}, "bad_request"},
		{"forget with entries of the wrong type", "forget", map[string]any{"chat": "on", "entries": "all"}, "bad_request"},
		{"forget while it is off", "forget", map[string]any{"chat": "errs", "entries": []int{0}}, "not_found"},
		{"forget of a bad chat id", "forget", map[string]any{"chat": "a/b", "entries": []int{0}}, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || code(res) != c.code || !strings.HasPrefix(mcptest.Text(res), c.code+": ") {
				t.Fatalf("answered %v %v %q, want a tool error of code %s", res.IsError, res.StructuredContent, mcptest.Text(res), c.code)
			}
		})
	}

	t.Run("a tool the server does not have", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "rewind", Arguments: map[string]any{"chat": "errs"}})
		je, ok := errors.AsType[*jsonrpc.Error](err)
		var data struct{ Code string }
		if !ok || json.Unmarshal(je.Data, &data) != nil || data.Code != "not_found" || !strings.HasPrefix(je.Message, "not_found: ") {
			t.Fatalf("a call of no tool: %v, want a JSON-RPC error of code not_found", err)
		}
	})
}
