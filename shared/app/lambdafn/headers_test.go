package lambdafn_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// responseHeader reads a response header as API Gateway would send it.
func responseHeader(resp events.APIGatewayV2HTTPResponse, name string) string {
	if v := header(resp.Headers, name); v != "" {
		return v
	}
	for k, vs := range resp.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return strings.Join(vs, ", ")
		}
	}
	return ""
}

// Every JSON answer carries a tenant's data (or an error about it): no
// client may read it as another type, and no cache may keep it.
func TestEveryJSONAnswerIsNosniffAndNoStore(t *testing.T) {
	fns := functions(t)
	img := noisyPNG(t, 4, 8, 8)
	if status, out, _ := fns["memory"].call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": "hello"}}})); status != http.StatusOK {
		t.Fatalf("append: %d %s", status, out)
	}
	cases := []struct {
		fn, method, path, query, body string
		status                        int
	}{
		{"memory", "GET", "/v1/chats", "", "", http.StatusOK},
		{"memory", "GET", "/v1/chats/c/messages", "images=links", "", http.StatusOK},
		{"memory", "GET", "/v1/chats/c/view", "", "", http.StatusOK},
		{"memory", "GET", "/v1/chats/c/status", "", "", http.StatusOK},
		{"memory", "GET", "/v1/chats/c/tree", "", "", http.StatusOK},
		{"memory", "POST", "/v1/chats/c/tools/zoom", "", `{"id":0}`, http.StatusOK},
		{"memory", "GET", "/v1/chats/c/export", "", "", http.StatusOK},
		{"memory", "GET", "/v1/retention", "", "", http.StatusOK},
		{"memory", "GET", "/v1/chats/c/messages", "after=x", "", http.StatusBadRequest},
		{"memory", "GET", "/v1/nothing", "", "", http.StatusNotFound},
		{"offload", "POST", "/v1/chats/c/hooks/after-tool", "", string(mustJSON(t, obj{"call": obj{"id": "1", "name": "t"}, "result": obj{"content": list{obj{"type": "image", "mimeType": "image/png", "data": img}}}})), http.StatusOK},
		{"offload", "POST", "/v1/chats/c/hooks/offload-input", "", `{"message":{"role":"user","content":"hi"}}`, http.StatusOK},
		{"restore", "POST", "/v1/chats/c/hooks/before-request", "", `{"format":"pi","request":{"messages":[]}}`, http.StatusOK},
		{"restore", "POST", "/v1/chats/c/hooks/before-request", "", `{`, http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path+"?"+c.query, func(t *testing.T) {
			resp := fns[c.fn].do(t, c.method, c.path, c.query, []byte(c.body))
			if resp.StatusCode != c.status {
				t.Fatalf("%d %.300s, want %d", resp.StatusCode, resp.Body, c.status)
			}
			if ct := responseHeader(resp, "Content-Type"); !strings.HasPrefix(ct, "application/") {
				t.Fatalf("content type %q", ct)
			}
			if got := responseHeader(resp, "X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if got := responseHeader(resp, "Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
		})
	}
}
