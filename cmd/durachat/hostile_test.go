package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/images/imagestest"
)

const (
	hostileTokenA = "hostile-token-tenant-a"
	hostileTokenB = "hostile-token-tenant-b"
)

// hostile sends a request as token (none when "") through start's checking
// proxy, which fails the test on an answer the OpenAPI document does not
// describe; it returns the status and body.
func hostile(t *testing.T, method, target, token string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, out
}

// The answers a hostile tenant provoked, each checked against the OpenAPI
// document by start's proxy: a body past the limit on every route that
// takes one, MCP requests with a Host not loopback and with sessions
// ended or another tenant's, a chat id that is an encoded slash on every
// chat route, and an upload target's answer.
func TestTheAnswersAHostileTenantProvokesAreInTheDocument(t *testing.T) {
	base, _ := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir(),
		config.EnvTokens: hostileTokenA + "=a," + hostileTokenB + "=b"})
	ops := checked.Operations()

	t.Run("a body past the limit on every route that takes one", func(t *testing.T) {
		big := bytes.Repeat([]byte(" "), api.MaxBody+1)
		upload := bytes.Repeat([]byte(" "), images.MaxUploadBytes+1)
		for _, op := range ops {
			method, path, _ := strings.Cut(op, " ")
			if method != http.MethodPost && method != http.MethodPut {
				continue
			}
			body := big
			if strings.HasPrefix(path, "/v1/uploads/") {
				body = upload
			}
			target := base + strings.NewReplacer("{chat}", "c", "{key}", "k").Replace(path)
			if code, _, out := hostile(t, method, target, hostileTokenA, body, nil); code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: %d %.200s, want 413", op, code, out)
			}
		}
	})

	t.Run("an encoded slash for a chat id on every chat route", func(t *testing.T) {
		for _, op := range ops {
			method, path, _ := strings.Cut(op, " ")
			if !strings.Contains(path, "{chat}") {
				continue
			}
			target := base + strings.NewReplacer("{chat}", "%2F", "{name}", "0000000000000000", "{id}", "000000000000000000000000").Replace(path)
			code, _, out := hostile(t, method, target, hostileTokenA, []byte("{}"), nil)
			var e struct{ Error struct{ Field string } }
			_ = json.Unmarshal(out, &e)
			if code != http.StatusBadRequest || (method != http.MethodHead && e.Error.Field != "chat") {
				t.Errorf("%s with chat %%2F: %d %.200s, want 400 naming chat", op, code, out)
			}
		}
	})

	t.Run("MCP requests no session or host allows", func(t *testing.T) {
		mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
		init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		code, h, out := hostile(t, "POST", base+"/v1/mcp", hostileTokenA, init, mcpHeaders)
		session := h.Get("Mcp-Session-Id")
		if code != http.StatusOK || session == "" {
			t.Fatalf("initialize: %d %q %.200s", code, session, out)
		}
		ping := []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		for _, tc := range []struct {
			name, method, token string
			header              map[string]string
			want                int
		}{
			{"another tenant's session", "POST", hostileTokenB, map[string]string{"Mcp-Session-Id": session}, http.StatusNotFound},
			{"another tenant's session's stream", "GET", hostileTokenB, map[string]string{"Mcp-Session-Id": session}, http.StatusNotFound},
			{"a session that never was", "POST", hostileTokenA, map[string]string{"Mcp-Session-Id": "nope"}, http.StatusNotFound},
			{"the stream of a session that never was", "GET", hostileTokenA, map[string]string{"Mcp-Session-Id": "nope", "Accept": "text/event-stream"}, http.StatusNotFound},
			{"a Host not loopback", "POST", hostileTokenA, map[string]string{"Host": "durachat.example"}, http.StatusForbidden},
			{"a stream with a Host not loopback", "GET", hostileTokenA, map[string]string{"Host": "durachat.example", "Accept": "text/event-stream"}, http.StatusForbidden},
		} {
			header := map[string]string{"Accept": mcpHeaders["Accept"]}
			for k, v := range tc.header {
				header[k] = v
			}
			var body []byte
			if tc.method == "POST" {
				body = ping
			}
			if code, _, out := hostile(t, tc.method, base+"/v1/mcp", tc.token, body, header); code != tc.want {
				t.Errorf("%s: %d %.200s, want %d", tc.name, code, out, tc.want)
			}
		}
	})

	t.Run("an upload stored and one refused", func(t *testing.T) {
		png := imagestest.NoisyPNG(5, 16, 16)
		sum := sha256.Sum256(png)
		req, _ := json.Marshal(map[string]any{"name": images.Name(base64.StdEncoding.EncodeToString(png)), "size": len(png), "type": "image/png", "sha256": hex.EncodeToString(sum[:])})
		code, _, out := hostile(t, "POST", base+"/v1/chats/c/uploads", hostileTokenA, req, nil)
		var up struct {
			Upload struct {
				URL     string
				Headers map[string]string
			}
		}
		if err := json.Unmarshal(out, &up); code != http.StatusOK || err != nil || up.Upload.URL == "" {
			t.Fatalf("upload: %d %s", code, out)
		}
		// The target names the server itself; send it through the proxy.
		u, err := url.Parse(up.Upload.URL)
		if err != nil {
			t.Fatal(err)
		}
		target := base + u.RequestURI()
		delete(up.Upload.Headers, "Content-Length")
		if code, _, out := hostile(t, "PUT", target, "", png, up.Upload.Headers); code != http.StatusOK {
			t.Errorf("PUT the bytes: %d %s", code, out)
		}
		if code, _, out := hostile(t, "PUT", target+"0", "", png, up.Upload.Headers); code != http.StatusForbidden {
			t.Errorf("PUT to a tampered target: %d %s, want 403", code, out)
		}
	})
}
