package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/lambdahttp"
	"github.com/durachat/durachat/shared/ui"
)

// handler is a program's handler behind bearer tokens, with the browser's
// pages public, as the local server and the memory function serve them.
func handler(t *testing.T) http.Handler {
	t.Helper()
	private := api.RegisterFunc(func(mux *http.ServeMux) {
		api.Handle(mux, "GET /v1/chats/{chat}/view", func(w http.ResponseWriter, r *http.Request) error {
			api.WriteJSON(w, 200, map[string]string{"view": "secret"})
			return nil
		})
	})
	h, err := app.Handler(nil, api.BearerTokens(map[string]string{"tok": "t1"}), app.Stores{}, []api.Routes{private}, ui.New())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestAssetsArePublicAndTheDataIsNot(t *testing.T) {
	h := handler(t)
	for _, tc := range []struct {
		path, status, contentType, body string
	}{
		{"/ui/", "200", "text/html", `<script src="app.js"`},
		{"/ui/index.html", "200", "text/html", `<label for="token-input">`},
		{"/ui/app.js", "200", "text/javascript", `sessionStorage`},
		{"/ui/style.css", "200", "text/css", `@media`},
		{"/ui/missing.js", "404", "application/json", `"not_found"`},
		{"/ui/assets/app.js", "404", "application/json", `"not_found"`},
		{"/v1/chats/c/view", "401", "application/json", `"unauthorized"`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if got := rec.Result().Status[:3]; got != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.contentType) ||
			!strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("GET %s: %s %s %.80q, want %s %s with %q", tc.path, got, rec.Header().Get("Content-Type"), rec.Body, tc.status, tc.contentType, tc.body)
		}
		if tc.status == "200" {
			csp := rec.Header().Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: policy %q", tc.path, csp)
			}
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui", nil))
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/ui/index.html" {
		t.Errorf("GET /ui: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/ui/", nil))
	if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want it refused", rec.Code)
	}
}

func TestAnUnchangedAssetIsNotSentAgain(t *testing.T) {
	h := handler(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/app.js", nil))
	etag := rec.Header().Get("ETag")
	if etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, rec.Header().Get("Cache-Control"))
	}
	req := httptest.NewRequest("GET", "/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation: %d with %d bytes", rec.Code, rec.Body.Len())
	}
}

// The memory function serves the pages through API Gateway's event, on the
// template's routes without the authorizer (infra checks those routes).
func TestTheMemoryFunctionServesThePagesWithoutCredentials(t *testing.T) {
	a := lambdahttp.New(handler(t))
	for _, route := range []struct{ key, path, want string }{
		{"GET /ui/{proxy+}", "/ui/index.html", "<title>durachat memory</title>"},
		{"GET /ui/{proxy+}", "/ui/app.js", "sessionStorage"},
	} {
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: route.key, RawPath: route.path,
			Headers: map[string]string{"accept": "text/html"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				RouteKey: route.key, RequestID: "req-1",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: route.path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
			},
		}
		resp, err := a.Invoke(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.IsBase64Encoded || !strings.Contains(resp.Body, route.want) {
			t.Errorf("%s: %d base64=%v %.80q", route.path, resp.StatusCode, resp.IsBase64Encoded, resp.Body)
		}
	}
}

func TestImagesMayComeFromTheLinksOriginAndNoOtherOrigin(t *testing.T) {
	tests := []struct {
		name    string
		origins []string
		want    string
	}{
		{"no links", nil, "img-src 'self' blob: data:;"},
		{"the bucket's links", []string{"https://b.s3.us-east-1.amazonaws.com"}, "img-src 'self' blob: data: https://b.s3.us-east-1.amazonaws.com;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := app.Handler(nil, api.SingleTenant("t"), app.Stores{}, nil, ui.New(tt.origins...))
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/index.html", nil))
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, tt.want) || strings.Contains(csp, "https:;") || strings.Contains(csp, " http:") {
				t.Fatalf("policy %q, want %q and no scheme wildcard", csp, tt.want)
			}
		})
	}
}

func TestAnOriginIsTheSchemeAndHostOfALink(t *testing.T) {
	tests := []struct {
		url, want string
		ok        bool
	}{
		{"https://b.s3.us-east-1.amazonaws.com/images/t/0123?X-Amz-Signature=x", "https://b.s3.us-east-1.amazonaws.com", true},
		{"http://127.0.0.1:8080/v1/links/images/t/0123?exp=1&sig=x", "http://127.0.0.1:8080", true},
		{"data:image/png;base64,AAAA", "", false},
		{"/relative/path", "", false},
		{"https://evil.example;script-src *", "", false},
	}
	for _, tt := range tests {
		got, err := ui.Origin(tt.url)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Origin(%q) = %q, %v; want %q, ok %v", tt.url, got, err, tt.want, tt.ok)
		}
	}
}
