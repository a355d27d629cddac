package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
)

func TestTheDocumentIsValidOpenAPI31(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if v.doc.OpenAPI != "3.1.0" || !v.doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1.0", v.doc.OpenAPI)
	}
}

func TestTheDocumentIsServedWithoutCredentials(t *testing.T) {
	h, err := api.NewHandler(api.Options{Auth: api.AuthFunc(func(*http.Request) (string, error) {
		return "", api.Unauthorized("no credentials")
	})})
	if err != nil {
		t.Fatal(err)
	}
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(t, v, h))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || !bytes.Equal(got.Bytes(), api.OpenAPI) {
		t.Errorf("%d %q, %d bytes; want 200 application/json, the document", res.StatusCode, res.Header.Get("Content-Type"), got.Len())
	}
}

// exchange builds an Exchange of a JSON request and answer.
func exchange(method, target, reqBody string, status int, header http.Header, body string) Exchange {
	r := httptest.NewRequest(method, target, strings.NewReader(reqBody))
	if reqBody != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if header == nil {
		header = http.Header{}
	}
	if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}
	return Exchange{Request: r, RequestBody: []byte(reqBody), Status: status, Header: header, Body: []byte(body)}
}

func TestAnExchangeTheDocumentDoesNotDescribeIsReported(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	retry := http.Header{"Retry-After": {"10"}}
	for _, tc := range []struct {
		name string
		x    Exchange
		ok   bool
	}{
		{"a described answer", exchange("GET", "/v1/retention", "", 200, nil, `{"days":0}`), true},
		{"a field of the wrong type", exchange("GET", "/v1/retention", "", 200, nil, `{"days":"0"}`), false},
		{"a required field missing", exchange("POST", "/v1/chats/c/messages", `{"messages":[]}`, 200, nil, `{}`), false},
		{"a status not listed", exchange("GET", "/v1/retention", "", 418, nil, `{"error":{"code":"x","message":"y"}}`), false},
		{"a 503 with Retry-After", exchange("GET", "/healthz", "", 503, retry, `{"error":{"code":"unavailable","message":"down"}}`), true},
		{"a 503 without Retry-After", exchange("GET", "/healthz", "", 503, nil, `{"error":{"code":"unavailable","message":"down"}}`), false},
		{"an error code not listed", exchange("GET", "/healthz", "", 503, retry, `{"error":{"code":"busy","message":"down"}}`), false},
		{"a refused request refused", exchange("PUT", "/v1/retention", `{"days":"x"}`, 400, nil, `{"error":{"code":"bad_request","message":"days","field":"days"}}`), true},
		{"a refused request accepted", exchange("PUT", "/v1/retention", `{"days":"x"}`, 200, nil, `{"days":0}`), false},
		{"an unknown route answered 404", exchange("GET", "/v1/nothing", "", 404, nil, `{"error":{"code":"not_found","message":"no route"}}`), true},
		{"an unknown route answered 200", exchange("GET", "/v1/nothing", "", 200, nil, `{}`), false},
		{"an unknown route answered in another shape", exchange("GET", "/v1/nothing", "", 404, nil, `404 page not found`), false},
		{"an error code outside the Error schema", exchange("GET", "/v1/nothing", "", 404, nil, `{"error":{"code":"gone_fishing","message":"no route"}}`), false},
		{"a body where the document describes none", exchange("POST", "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, nil, `{"ok":true}`), false},
		{"no body where the document describes none", exchange("POST", "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, nil, ``), true},
		{"no body where the document describes one", exchange("GET", "/v1/retention", "", 200, nil, ``), false},
		{"a media type not listed", exchange("GET", "/v1/retention", "", 200, http.Header{"Content-Type": {"text/plain"}}, `0`), false},
		{"a 413 on a body the document lists it for", exchange("PUT", "/v1/retention", `{"days":1}`, 413, nil, `{"error":{"code":"too_large","message":"request body over 10485760 bytes"}}`), true},
		{"the MCP transport's 403 for a Host not loopback", exchange("POST", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 403, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, "Forbidden: invalid Host header\n"), true},
		{"another tenant's MCP session", exchange("GET", "/v1/mcp", "", 404, nil, `{"error":{"code":"not_found","message":"no MCP session s"}}`), true},
		{"an upload stored", exchange("PUT", "/v1/uploads/k?exp=1&size=1&sha256=a&type=image%2Fpng&sig=s", "{}", 200, nil, `{"key":"k"}`), true},
		{"the gateway's 401", exchange("GET", "/v1/chats", "", 401, http.Header{"Www-Authenticate": {"Bearer"}}, `{"message":"Unauthorized"}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Check(context.Background(), tc.x)
			if (err == nil) != tc.ok {
				t.Errorf("Check: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestEveryErrorCodeTheServerWritesIsInTheDocument(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	errSchema := string(doc.Components.Schemas["Error"])
	for _, code := range []string{"bad_request", "unauthorized", "forbidden", "not_found", "method_not_allowed", "conflict", "deleting", "expired", "too_large", "internal", "unavailable"} {
		if !strings.Contains(errSchema, `"`+code+`"`) {
			t.Errorf("error code %s is not in the Error schema", code)
		}
	}
}
