package lambdafn_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// do invokes f with any method, query and body, as API Gateway sends them.
func (f *function) do(t *testing.T, method, path, query string, body []byte) events.APIGatewayV2HTTPResponse {
	return f.doAs(t, nil, method, path, query, body)
}

// doAs is do for a request API Gateway's JWT authorizer vouched for with
// claims (nil: no authorizer).
func (f *function) doAs(t *testing.T, claims map[string]string, method, path, query string, body []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, RawQueryString: query, Body: string(body),
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "r", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}},
	}
	if claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
	resp, _ := f.send(t, ev)
	return resp
}

// Numbers at and past the edges of int64, and past every route's range.
var hostileNumbers = []string{"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-1", "4611686018427387904"}

func TestEveryNumericParameterOutOfRangeIsA400NamingIt(t *testing.T) {
	fns := functions(t)
	mem := fns["memory"]
	if status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": "hello"}}})); status != http.StatusOK {
		t.Fatalf("append: %d %s", status, out)
	}
	cases := []struct {
		fn, method, path, param string
		// query or body builds the request from a number's text.
		query func(n string) string
		body  func(n string) string
	}{
		{fn: "memory", method: "GET", path: "/v1/chats", param: "limit", query: func(n string) string { return "limit=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/messages", param: "after", query: func(n string) string { return "after=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/messages", param: "limit", query: func(n string) string { return "limit=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/export", param: "after", query: func(n string) string { return "after=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/tree", param: "level", query: func(n string) string { return "level=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/tree", param: "from", query: func(n string) string { return "from=" + n }},
		{fn: "memory", method: "GET", path: "/v1/chats/c/tree", param: "limit", query: func(n string) string { return "limit=" + n }},
		{fn: "memory", method: "PUT", path: "/v1/retention", param: "days", body: func(n string) string { return `{"days":` + n + `}` }},
		{fn: "memory", method: "PUT", path: "/v1/chats/c/retention", param: "days", body: func(n string) string { return `{"days":` + n + `}` }},
		{fn: "offload", method: "POST", path: "/v1/chats/c/uploads", param: "size", body: func(n string) string {
			return `{"name":"0123456789abcdef","type":"image/png","sha256":"` + strings.Repeat("0", 64) + `","size":` + n + `}`
		}},
		{fn: "offload", method: "POST", path: "/v1/chats/c/hooks/after-tool", param: "bounds.maxBytes", body: func(n string) string {
			return `{"call":{"id":"1","name":"t"},"result":{"content":[]},"bounds":{"maxBytes":` + n + `}}`
		}},
		{fn: "offload", method: "POST", path: "/v1/chats/c/hooks/after-tool", param: "bounds.maxLines", body: func(n string) string {
			return `{"call":{"id":"1","name":"t"},"result":{"content":[]},"bounds":{"maxLines":` + n + `}}`
		}},
		{fn: "restore", method: "POST", path: "/v1/chats/c/hooks/before-request", param: "budgetBytes", body: func(n string) string {
			return `{"format":"pi","request":{"messages":[]},"budgetBytes":` + n + `}`
		}},
	}
	for _, c := range cases {
		for _, n := range hostileNumbers {
			t.Run(c.method+" "+c.path+" "+c.param+"="+n, func(t *testing.T) {
				var query string
				var body []byte
				if c.query != nil {
					query = c.query(n)
				} else {
					body = []byte(c.body(n))
				}
				resp := fns[c.fn].do(t, c.method, c.path, query, body)
				if resp.StatusCode >= 500 {
					t.Fatalf("%d %s", resp.StatusCode, resp.Body)
				}
				if resp.StatusCode == http.StatusOK {
					// Some of these numbers are in range for some parameters.
					return
				}
				var e struct {
					Error struct{ Code, Field, Message string }
				}
				if err := json.Unmarshal([]byte(resp.Body), &e); err != nil {
					t.Fatalf("%d %s: %v", resp.StatusCode, resp.Body, err)
				}
				if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Field != c.param {
					t.Fatalf("%d %s, want a 400 naming %s", resp.StatusCode, resp.Body, c.param)
				}
			})
		}
	}
}

// The memory tools answer out-of-range arguments as a tool result the
// model can read (isError), never an error status, and never read past
// the log: a block of a huge id and n must not overflow past the check.
func TestEveryToolArgumentOutOfRangeIsAToolError(t *testing.T) {
	fns := functions(t)
	mem := fns["memory"]
	if status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": "hello"}}})); status != http.StatusOK {
		t.Fatalf("append: %d %s", status, out)
	}
	if resp := mem.do(t, "PUT", "/v1/chats/c/memory/settings", "", []byte(`{"search":true}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("search on: %d %s", resp.StatusCode, resp.Body)
	}
	cases := []struct {
		tool, param, body string
		// clamped: a positive number is cut to the most the tool gives.
		clamped bool
	}{
		{tool: "zoom", param: "id", body: `{"id":%s}`},
		{tool: "zoom", param: "n", body: `{"id":0,"n":%s}`},
		{tool: "zoom", param: "n", body: `{"id":4611686018427387904,"n":%s}`},
		{tool: "zoom", param: "offset", body: `{"id":0,"offset":%s}`},
		{tool: "zoom", param: "limit", body: `{"id":0,"limit":%s}`, clamped: true},
		{tool: "date", param: "id", body: `{"id":%s}`},
		{tool: "search", param: "before", body: `{"text":"hello","before":%s}`},
	}
	for _, c := range cases {
		for _, n := range hostileNumbers {
			body := strings.Replace(c.body, "%s", n, 1)
			t.Run(c.tool+" "+body, func(t *testing.T) {
				resp := mem.do(t, "POST", "/v1/chats/c/tools/"+c.tool, "", []byte(body))
				if resp.StatusCode == http.StatusBadRequest && strings.Contains(resp.Body, `"field":"`+c.param+`"`) {
					return // not an int64 at all: a 400 naming the argument
				}
				var res struct{ IsError bool }
				if err := json.Unmarshal([]byte(resp.Body), &res); err != nil {
					t.Fatalf("%d %s: %v", resp.StatusCode, resp.Body, err)
				}
				if c.clamped && !strings.HasPrefix(n, "-") {
					if resp.StatusCode != http.StatusOK || res.IsError {
						t.Fatalf("%d %s, want the page, clamped", resp.StatusCode, resp.Body)
					}
					return
				}
				if resp.StatusCode != http.StatusOK || !res.IsError {
					t.Fatalf("%d %s, want an error result", resp.StatusCode, resp.Body)
				}
			})
		}
	}
}
