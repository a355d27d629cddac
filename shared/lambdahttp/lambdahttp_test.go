package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/durachat/durachat/shared/api"
)

// pngBytes is a real PNG: its bytes are not valid UTF-8, so the answer
// must travel base64-encoded.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type testRoutes struct{ png []byte }

func (tr testRoutes) Register(mux *http.ServeMux) {
	api.Handle(mux, "GET /v1/chats/{chat}/images/{name}", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Add("Cache-Control", "private")
		w.Header().Add("Cache-Control", "max-age=60")
		_, err := w.Write(tr.png)
		return err
	})
	api.Handle(mux, "POST /v1/chats/{chat}/echo", func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, map[string]any{
			"tenant":     api.Tenant(r.Context()),
			"chat":       r.PathValue("chat"),
			"body":       base64.StdEncoding.EncodeToString(body),
			"query":      r.URL.Query()["q"],
			"accept":     r.Header.Values("Accept"),
			"request_id": api.RequestID(r.Context()),
			"length":     r.ContentLength,
		})
		return nil
	})
	mux.HandleFunc("POST /v1/silent", func(http.ResponseWriter, *http.Request) {})
}

func newAdapter(t *testing.T, auth api.Authenticator) (*Adapter, []byte) {
	t.Helper()
	img := pngBytes(t)
	h, err := api.NewHandler(api.Options{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Auth:   auth,
		Routes: []api.Routes{testRoutes{png: img}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return New(h), img
}

func event(method, path, query string, claims map[string]string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "$default",
		RawPath:        path,
		RawQueryString: query,
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   "$default",
			AccountID:  "123456789012",
			Stage:      "$default",
			RequestID:  "JKJaXmPLvHcESHA=",
			APIID:      "abc123",
			DomainName: "abc123.execute-api.us-east-1.amazonaws.com",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: "test",
			},
		},
	}
	if claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
	return ev
}

// invoke sends ev as JSON through the runtime's handler that Start runs,
// as a deployed function receives it.
func invoke(t *testing.T, a *Adapter, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(a.Handler()).Invoke(context.Background(), payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return resp
}

func TestBinaryResponseIsBase64Encoded(t *testing.T) {
	a, img := newAdapter(t, ClaimTenant("sub", nil))
	resp := invoke(t, a, event("GET", "/v1/chats/c1/images/0123456789abcdef", "", map[string]string{"sub": "t1"}))
	if resp.StatusCode != 200 || !resp.IsBase64Encoded {
		t.Fatalf("status %d base64 %v", resp.StatusCode, resp.IsBase64Encoded)
	}
	got, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil || !bytes.Equal(got, img) {
		t.Fatalf("body is not the PNG bytes (%v)", err)
	}
	if resp.Headers["Content-Type"] != "image/png" {
		t.Errorf("content type %q", resp.Headers["Content-Type"])
	}
	if cc := resp.Headers["Cache-Control"]; !strings.Contains(cc, "private") || !strings.Contains(cc, "max-age=60") {
		t.Errorf("multi-value header %q lost a value", cc)
	}
}

func TestJWTClaimNamesTheTenant(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("custom:tenant", nil))
	ev := event("POST", "/v1/chats/c1/echo", "q=a&q=b", map[string]string{"sub": "user-1", "custom:tenant": "acme"})
	ev.Body = `{"x":1}`
	ev.Headers["accept"] = "application/json, text/plain"
	resp := invoke(t, a, ev)
	if resp.StatusCode != 200 || resp.IsBase64Encoded {
		t.Fatalf("status %d base64 %v body %q", resp.StatusCode, resp.IsBase64Encoded, resp.Body)
	}
	var got struct {
		Tenant, Chat, Body string
		Query, Accept      []string
		RequestID          string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || got.Chat != "c1" {
		t.Errorf("tenant %q chat %q", got.Tenant, got.Chat)
	}
	if b, _ := base64.StdEncoding.DecodeString(got.Body); string(b) != `{"x":1}` {
		t.Errorf("body %q", b)
	}
	if len(got.Query) != 2 || len(got.Accept) != 2 {
		t.Errorf("query %v accept %v: repeated values lost", got.Query, got.Accept)
	}
	if got.RequestID != ev.RequestContext.RequestID || resp.Headers["X-Request-Id"] != ev.RequestContext.RequestID {
		t.Errorf("request id %q header %q, want API Gateway's %q", got.RequestID, resp.Headers["X-Request-Id"], ev.RequestContext.RequestID)
	}
}

func TestBase64RequestBodyIsDecoded(t *testing.T) {
	a, img := newAdapter(t, ClaimTenant("sub", nil))
	ev := event("POST", "/v1/chats/c1/echo", "", map[string]string{"sub": "t1"})
	ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(img), true
	resp := invoke(t, a, ev)
	var got struct{ Body string }
	_ = json.Unmarshal([]byte(resp.Body), &got)
	if b, _ := base64.StdEncoding.DecodeString(got.Body); !bytes.Equal(b, img) {
		t.Fatalf("status %d: the handler did not get the decoded bytes", resp.StatusCode)
	}
}

// A handler learns the body's length up front, so api.DecodeJSON reads it
// into one buffer of that size instead of growing one.
func TestRequestDeclaresTheBodyLength(t *testing.T) {
	a, img := newAdapter(t, ClaimTenant("sub", nil))
	for _, tc := range []struct {
		name   string
		body   string
		base64 bool
		want   int64
	}{
		{"plain", `{"x":"` + strings.Repeat("a", 1000) + `"}`, false, 1008},
		{"base64", base64.StdEncoding.EncodeToString(img), true, int64(len(img))},
		{"base64 of one byte", base64.StdEncoding.EncodeToString([]byte{0x80}), true, 1},
		{"base64 of two bytes", base64.StdEncoding.EncodeToString([]byte{0x80, 1}), true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := event("POST", "/v1/chats/c1/echo", "", map[string]string{"sub": "t1"})
			ev.Body, ev.IsBase64Encoded = tc.body, tc.base64
			resp := invoke(t, a, ev)
			var got struct{ Length int64 }
			if err := json.Unmarshal([]byte(resp.Body), &got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d body %q", resp.StatusCode, resp.Body)
			}
			if got.Length != tc.want {
				t.Fatalf("ContentLength %d, want %d", got.Length, tc.want)
			}
		})
	}
}

func TestUndecodableBodyIs400JSON(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", nil))
	ev := event("POST", "/v1/chats/c1/echo", "", map[string]string{"sub": "t1"})
	ev.Body, ev.IsBase64Encoded = "not base64!", true
	resp := invoke(t, a, ev)
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"bad_request"`) {
		t.Fatalf("status %d body %q", resp.StatusCode, resp.Body)
	}
}

func TestTokenWithoutTheClaimIs401(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("tenant", nil))
	resp := invoke(t, a, event("POST", "/v1/chats/c1/echo", "", map[string]string{"sub": "user-1"}))
	if resp.StatusCode != 401 || !strings.Contains(resp.Body, `"unauthorized"`) || !strings.Contains(resp.Body, "tenant") {
		t.Fatalf("status %d body %q", resp.StatusCode, resp.Body)
	}
	if resp.Headers["Www-Authenticate"] == "" {
		t.Errorf("no WWW-Authenticate in %v", resp.Headers)
	}
}

func TestWithoutAuthorizerBearerTokensAreTheFallback(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", api.BearerTokens(map[string]string{"tok": "acme"})))
	ev := event("POST", "/v1/chats/c1/echo", "", nil)
	if resp := invoke(t, a, ev); resp.StatusCode != 401 {
		t.Fatalf("no token: status %d", resp.StatusCode)
	}
	ev.Headers["authorization"] = "Bearer tok"
	resp := invoke(t, a, ev)
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"tenant":"acme"`) {
		t.Fatalf("status %d body %q", resp.StatusCode, resp.Body)
	}
}

func TestWithoutAuthorizerOrTokensEverythingIsRefused(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", nil))
	ev := event("POST", "/v1/chats/c1/echo", "", nil)
	ev.Headers["authorization"] = "Bearer anything"
	if resp := invoke(t, a, ev); resp.StatusCode != 401 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp := invoke(t, a, event("GET", "/healthz", "", nil)); resp.StatusCode != 200 || strings.TrimSpace(resp.Body) != `{"ok":true}` {
		t.Fatalf("healthz: status %d body %q", resp.StatusCode, resp.Body)
	}
	if resp := invoke(t, a, event("GET", "/v1/openapi.json", "", nil)); resp.StatusCode != 200 || resp.Body != string(api.OpenAPI) {
		t.Fatalf("openapi.json: status %d, %d bytes", resp.StatusCode, len(resp.Body))
	}
}

func TestSilentHandlerAnswers200(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", nil))
	resp := invoke(t, a, event("POST", "/v1/silent", "", map[string]string{"sub": "t"}))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestUnknownRouteIs404JSON(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", nil))
	resp := invoke(t, a, event("GET", "/nope", "", map[string]string{"sub": "t"}))
	if resp.StatusCode != 404 || !strings.Contains(resp.Body, `"not_found"`) {
		t.Fatalf("status %d body %q", resp.StatusCode, resp.Body)
	}
}

// A HEAD answer has headers only, as net/http sends it locally: the
// handlers write the GET's body and leave it to the server to drop.
func TestAHeadAnswerHasNoBody(t *testing.T) {
	a, _ := newAdapter(t, ClaimTenant("sub", nil))
	resp := invoke(t, a, event("HEAD", "/nope", "", map[string]string{"sub": "t"}))
	if resp.StatusCode != 404 || resp.Body != "" {
		t.Fatalf("status %d body %q, want 404 and no body", resp.StatusCode, resp.Body)
	}
}

func BenchmarkInvokeImage(b *testing.B) {
	img := make([]byte, 1<<20)
	for i := range img {
		img[i] = byte(i*7 + 0x80)
	}
	h, _ := api.NewHandler(api.Options{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Auth:   ClaimTenant("sub", nil),
		Routes: []api.Routes{testRoutes{png: img}},
	})
	a := New(h)
	ev := event("GET", "/v1/chats/c1/images/0123456789abcdef", "", map[string]string{"sub": "t1"})
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Invoke(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAnAnswerOverLambdasLimitIsAJSONError: Lambda would drop it and API
// Gateway answer a bare 500; the adapter answers that status in JSON. An
// answer at the limit passes.
func TestAnAnswerOverLambdasLimitIsAJSONError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		status int
	}{
		{"AtTheLimit", MaxResponsePayload - 1024, http.StatusOK},
		{"OverTheLimit", MaxResponsePayload + 1, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.Write(bytes.Repeat([]byte("a"), tc.size))
			})
			resp, err := New(h).Invoke(context.Background(), event("GET", "/big", "", nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || PayloadSize(resp) > MaxResponsePayload {
				t.Fatalf("status %d, %d bytes", resp.StatusCode, PayloadSize(resp))
			}
			if tc.status != http.StatusOK && !strings.Contains(resp.Body, `"code":"internal"`) {
				t.Fatalf("not a JSON error: %.200s", resp.Body)
			}
			// PayloadSize counts what the runtime sends: the encoding
			// without its trailing newline.
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(resp)
			if got := buf.Len() - 1; got != PayloadSize(resp) {
				t.Fatalf("encoded %d bytes, PayloadSize says %d", got, PayloadSize(resp))
			}
			// The handler Start runs measures what it sends the same way.
			sent := invoke(t, New(h), event("GET", "/big", "", nil))
			if sent.StatusCode != tc.status || PayloadSize(sent) > MaxResponsePayload {
				t.Fatalf("Handler: status %d, %d bytes", sent.StatusCode, PayloadSize(sent))
			}
		})
	}
}
