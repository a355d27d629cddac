package mcp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app/local/localtest"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
)

// rawMCP sends one request to the MCP endpoint with token and session,
// and returns the status and the body.
func rawMCP(ctx context.Context, t *testing.T, url, method, token, session, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url+mcp.Pattern, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && method == http.MethodGet {
		// A served stream does not end: its status is the answer.
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A session is the tenant's that opened it, whatever another tenant sends
// with its id: another tenant's DELETE is a 404 that ends nothing, and
// every request after it with that id (POST, the GET stream, a resource)
// is a 404 that carries nothing of the session's tenant; the session goes
// on serving its own tenant.
func TestASessionIsItsTenantsAloneEvenAfterAnotherTenantsDelete(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), map[string]string{config.EnvTokens: aliceToken + "=alice," + bobToken + "=bob"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	alice, err := connect(ctx, srv.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	const secret = "the vault code is 7391"
	if _, err := mcptest.Call(ctx, alice, "log", map[string]any{"chat": "victim", "messages": []any{
		map[string]any{"role": "user", "content": secret}}}); err != nil {
		t.Fatal(err)
	}
	// The view names the entry (not summarized yet); zoom reads its text.
	zoom := func() string {
		res, err := mcptest.Call(ctx, alice, "zoom", map[string]any{"chat": "victim", "id": 0, "n": 1})
		if err != nil {
			t.Fatal(err)
		}
		return mcptest.Text(res)
	}
	if !strings.Contains(zoom(), secret) {
		t.Fatalf("alice's zoom into victim does not hold what she logged: %q", zoom())
	}

	id := alice.ID()
	if status, _ := rawMCP(ctx, t, srv.URL, http.MethodDelete, bobToken, id, ""); status != http.StatusNotFound {
		t.Fatalf("bob's DELETE of alice's session: %d, want 404", status)
	}
	for _, c := range []struct{ name, method, body string }{
		{"a view", http.MethodPost, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"view","arguments":{"chat":"victim"}}}`},
		{"a zoom", http.MethodPost, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"zoom","arguments":{"chat":"victim","id":0,"n":1}}}`},
		{"the stream", http.MethodGet, ""},
		{"a resource", http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"` + mcp.ViewURI("victim") + `"}}`},
		{"another DELETE", http.MethodDelete, ""},
	} {
		status, body := rawMCP(ctx, t, srv.URL, c.method, bobToken, id, c.body)
		if status != http.StatusNotFound || strings.Contains(body, secret) {
			t.Errorf("bob's %s on alice's session after his DELETE: %d %q, want 404 and nothing of hers", c.name, status, body)
		}
	}
	if !strings.Contains(zoom(), secret) {
		t.Fatal("alice's session no longer serves her after bob's DELETE")
	}

	t.Run("an id no session has is a 404 to anyone", func(t *testing.T) {
		for _, token := range []string{aliceToken, bobToken} {
			if status, _ := rawMCP(ctx, t, srv.URL, http.MethodPost, token, "no-such-session",
				`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); status != http.StatusNotFound {
				t.Errorf("a made-up session id: %d, want 404", status)
			}
		}
	})
	t.Run("the owner's DELETE ends it for everyone", func(t *testing.T) {
		if status, body := rawMCP(ctx, t, srv.URL, http.MethodDelete, aliceToken, id, ""); status != http.StatusNoContent {
			t.Fatalf("alice's DELETE of her session: %d %q, want 204", status, body)
		}
		for _, token := range []string{aliceToken, bobToken} {
			status, body := rawMCP(ctx, t, srv.URL, http.MethodPost, token, id,
				`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"zoom","arguments":{"chat":"victim","id":0,"n":1}}}`)
			if status != http.StatusNotFound || strings.Contains(body, secret) {
				t.Errorf("an ended session: %d %q, want 404", status, body)
			}
		}
	})
}
