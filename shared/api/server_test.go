package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv/logkeys"
)

// echoRoutes is a feature with a route that reports who called it.
type echoRoutes struct{}

func (echoRoutes) Register(mux *http.ServeMux) {
	Handle(mux, "GET /v1/chats/{chat}/whoami", func(w http.ResponseWriter, r *http.Request) error {
		chat, err := Chat(r)
		if err != nil {
			return err
		}
		WriteJSON(w, http.StatusOK, map[string]string{"tenant": Tenant(r.Context()), "chat": chat, "request_id": RequestID(r.Context())})
		return nil
	})
	Handle(mux, "POST /v1/chats/{chat}/echo", func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := DecodeJSON(r, &v); err != nil {
			return err
		}
		WriteJSON(w, http.StatusOK, v)
		return nil
	})
	mux.HandleFunc("GET /v1/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
}

func newTestHandler(t *testing.T, o Options) (http.Handler, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	if o.Auth == nil {
		o.Auth = SingleTenant("local")
	}
	o.Routes = append(o.Routes, echoRoutes{})
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	return h, &logs
}

func serve(h http.Handler, method, target string, body io.Reader, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, body)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorBody decodes {"error": {...}} and fails when the answer is not one.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]string {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q, body %q", ct, rec.Body)
	}
	var v struct{ Error map[string]string }
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Error["code"] == "" {
		t.Fatalf("not a JSON error: %q (%v)", rec.Body, err)
	}
	return v.Error
}

func TestRequestIDIsGeneratedAndEchoed(t *testing.T) {
	h, _ := newTestHandler(t, Options{})
	a := serve(h, "GET", "/v1/chats/c1/whoami", nil, nil)
	b := serve(h, "GET", "/v1/chats/c1/whoami", nil, nil)
	idA, idB := a.Header().Get("X-Request-Id"), b.Header().Get("X-Request-Id")
	if idA == "" || idA == idB {
		t.Fatalf("request ids %q and %q", idA, idB)
	}
	var got map[string]string
	_ = json.Unmarshal(a.Body.Bytes(), &got)
	if got["request_id"] != idA {
		t.Errorf("handler saw request id %q, header %q", got["request_id"], idA)
	}
}

func TestRequestIDFromContextIsKept(t *testing.T) {
	h, _ := newTestHandler(t, Options{})
	req := httptest.NewRequest("GET", "/healthz", nil)
	req = req.WithContext(WithRequestID(req.Context(), "gw-123"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-Id"); got != "gw-123" {
		t.Fatalf("X-Request-Id %q", got)
	}
}

func TestEachRequestIsLoggedAsOneJSONLine(t *testing.T) {
	h, logs := newTestHandler(t, Options{Auth: BearerTokens(map[string]string{"tok": "acme"})})
	rec := serve(h, "GET", "/v1/chats/c1/whoami", nil, map[string]string{"Authorization": "Bearer tok"})
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if v["msg"] == "request" {
			line = v
		}
	}
	if line == nil {
		t.Fatalf("no request line in %q", logs)
	}
	want := map[string]any{
		"method": "GET", "route": "GET /v1/chats/{chat}/whoami", "status": float64(200),
		"tenant": "acme", "request_id": rec.Header().Get("X-Request-Id"),
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v", k, line[k], v)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("no duration_ms in %v", line)
	}
}

func TestPanicIsAnswered500JSON(t *testing.T) {
	h, logs := newTestHandler(t, Options{})
	rec := serve(h, "GET", "/v1/panic", nil, nil)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", rec.Code)
	}
	if e := errorBody(t, rec); e["code"] != "internal" || strings.Contains(rec.Body.String(), "boom") {
		t.Errorf("error %v leaks or is wrong: %q", e, rec.Body)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic was not logged: %q", logs)
	}
}

func TestUnknownRouteIs404JSON(t *testing.T) {
	h, _ := newTestHandler(t, Options{})
	rec := serve(h, "GET", "/v1/nothing", nil, nil)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d", rec.Code)
	}
	if e := errorBody(t, rec); e["code"] != "not_found" {
		t.Errorf("error %v", e)
	}
}

// ServeMux takes a segment that is an encoded slash alone for a trailing
// slash and matches no route; the server refuses it as it refuses a%2Fb.
func TestAnEncodedSlashInAPathParameterIsA400NamingIt(t *testing.T) {
	h, _ := newTestHandler(t, Options{Routes: []Routes{RegisterFunc(func(mux *http.ServeMux) {
		Handle(mux, "GET /v1/chats/{chat}/images/{name}", func(w http.ResponseWriter, r *http.Request) error { return nil })
	})}})
	for _, tc := range []struct{ method, target, field string }{
		{"GET", "/v1/chats/%2F/whoami", "chat"},
		{"GET", "/v1/chats/%2f/whoami", "chat"},
		{"GET", "/v1/chats/a%2Fb/whoami", "chat"},
		{"POST", "/v1/chats/%2F/echo", "chat"},
		{"GET", "/v1/chats/%2F%2F/whoami", "chat"},
		{"GET", "/v1/chats/c/images/%2F", "name"},
	} {
		rec := serve(h, tc.method, tc.target, strings.NewReader("{}"), nil)
		if e := errorBody(t, rec); rec.Code != http.StatusBadRequest || e["field"] != tc.field {
			t.Errorf("%s %s: %d %v, want 400 naming %s", tc.method, tc.target, rec.Code, e, tc.field)
		}
	}
	// A slash outside any parameter is still no route.
	if rec := serve(h, "GET", "/v1/chats/c%2Fwhoami", nil, nil); rec.Code != http.StatusNotFound {
		t.Errorf("GET /v1/chats/c%%2Fwhoami: %d, want 404", rec.Code)
	}
}

func TestWrongMethodIs405JSONWithAllow(t *testing.T) {
	h, _ := newTestHandler(t, Options{})
	rec := serve(h, "DELETE", "/v1/chats/c1/echo", nil, nil)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("status %d", rec.Code)
	}
	if e := errorBody(t, rec); e["code"] != "method_not_allowed" {
		t.Errorf("error %v", e)
	}
	if allow := rec.Header().Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("Allow %q", allow)
	}
}

func TestBodyOverLimitIs413(t *testing.T) {
	h, _ := newTestHandler(t, Options{MaxBody: 64})
	big := `{"x":"` + strings.Repeat("a", 100) + `"}`
	rec := serve(h, "POST", "/v1/chats/c1/echo", strings.NewReader(big), nil)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared length: status %d", rec.Code)
	}
	// A body without a declared length is cut off while it is read.
	req := httptest.NewRequest("POST", "/v1/chats/c1/echo", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("streamed: status %d %q", rec.Code, rec.Body)
	}
	if e := errorBody(t, rec); e["code"] != "too_large" {
		t.Errorf("error %v", e)
	}
}

func TestBearerTokensMapToTenants(t *testing.T) {
	h, _ := newTestHandler(t, Options{Auth: BearerTokens(map[string]string{"token1": "tenantA", "token2": "tenantB"})})
	tests := []struct {
		name   string
		auth   string
		status int
		tenant string
	}{
		{"first token", "Bearer token1", 200, "tenantA"},
		{"second token", "Bearer token2", 200, "tenantB"},
		{"scheme is case-insensitive", "bearer token2", 200, "tenantB"},
		{"missing header", "", 401, ""},
		{"wrong token", "Bearer token3", 401, ""},
		{"token prefix", "Bearer token", 401, ""},
		{"basic scheme", "Basic dG9rZW4xOg==", 401, ""},
		{"empty token", "Bearer ", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(h, "GET", "/v1/chats/c1/whoami", nil, map[string]string{"Authorization": tt.auth})
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if tt.status == 401 {
				if e := errorBody(t, rec); e["code"] != "unauthorized" {
					t.Errorf("error %v", e)
				}
				if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
				}
				return
			}
			var got map[string]string
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			if got["tenant"] != tt.tenant {
				t.Errorf("tenant %q, want %q", got["tenant"], tt.tenant)
			}
		})
	}
}

func TestAnAuthenticatorWithoutTenantIsRefused(t *testing.T) {
	h, _ := newTestHandler(t, Options{Auth: AuthFunc(func(*http.Request) (string, error) { return "", nil })})
	if rec := serve(h, "GET", "/v1/chats/c1/whoami", nil, nil); rec.Code != 401 {
		t.Fatalf("status %d", rec.Code)
	}
}

func TestATenantOutsideTheRuleIsRefusedWhateverNamedIt(t *testing.T) {
	for _, tenant := range []string{".", "..", "a\x00b", strings.Repeat("t", store.MaxTenant+1)} {
		h, _ := newTestHandler(t, Options{Auth: AuthFunc(func(*http.Request) (string, error) { return tenant, nil })})
		rec := serve(h, "GET", "/v1/chats/c1/whoami", nil, nil)
		if rec.Code != http.StatusUnauthorized || errorBody(t, rec)["code"] != "unauthorized" {
			t.Fatalf("tenant %q: %d %s, want 401", tenant, rec.Code, rec.Body)
		}
	}
}

func TestHealthzNeedsNoCredentials(t *testing.T) {
	h, _ := newTestHandler(t, Options{Auth: BearerTokens(map[string]string{"t": "x"})})
	rec := serve(h, "GET", "/healthz", nil, nil)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"ok":true}` {
		t.Fatalf("status %d body %q", rec.Code, rec.Body)
	}
}

func TestHealthzIs503WhenAStoreDoesNotAnswer(t *testing.T) {
	down := PingFunc(func(ctx context.Context) error {
		return store.Unavailable("get", errors.New("connection refused"))
	})
	h, _ := newTestHandler(t, Options{Health: down})
	rec := serve(h, "GET", "/healthz", nil, nil)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if e := errorBody(t, rec); e["code"] != "unavailable" {
		t.Errorf("error %v", e)
	}
}

func TestHealthzPingIsBounded(t *testing.T) {
	var deadline bool
	p := PingFunc(func(ctx context.Context) error {
		_, deadline = ctx.Deadline()
		return nil
	})
	h, _ := newTestHandler(t, Options{Health: p})
	if rec := serve(h, "GET", "/healthz", nil, nil); rec.Code != 200 || !deadline {
		t.Fatalf("status %d, deadline set %v", rec.Code, deadline)
	}
}

func TestNewHandlerRequiresAnAuthenticator(t *testing.T) {
	if _, err := NewHandler(Options{}); err == nil {
		t.Fatal("want an error")
	}
}

func BenchmarkHandlerOverhead(b *testing.B) {
	h, err := NewHandler(Options{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Auth:   BearerTokens(map[string]string{"token1": "tenantA"}),
		Routes: []Routes{echoRoutes{}},
	})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/chats/c1/whoami", nil)
	req.Header.Set("Authorization", "Bearer token1")
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

func TestPublicRoutesNeedNoCredentials(t *testing.T) {
	link := RegisterFunc(func(mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/links/{key...}", func(w http.ResponseWriter, r *http.Request) {
			WriteJSON(w, http.StatusOK, map[string]string{"key": r.PathValue("key"), "tenant": Tenant(r.Context())})
		})
	})
	h, _ := newTestHandler(t, Options{Auth: BearerTokens(map[string]string{"t": "x"}), Public: []Routes{link}})
	rec := serve(h, "GET", "/v1/links/images/a/b", nil, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"key":"images/a/b","tenant":""`) {
		t.Fatalf("status %d body %q", rec.Code, rec.Body)
	}
	if rec := serve(h, "GET", "/v1/chats/c1/whoami", nil, nil); rec.Code != 401 {
		t.Fatalf("private route without token: status %d", rec.Code)
	}
}

func TestWrongMethodOnAPublicRouteIs405(t *testing.T) {
	h, _ := newTestHandler(t, Options{})
	rec := serve(h, "POST", "/healthz", nil, nil)
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Header().Get("Allow"), "GET") {
		t.Fatalf("status %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	errorBody(t, rec)
}

func TestAsErrorStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"api error", BadRequest("chat", "bad chat"), http.StatusBadRequest},
		{"store outage", fmt.Errorf("read: %w", store.Unavailable("get", errors.New("throttled"))), http.StatusServiceUnavailable},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{"canceled", context.Canceled, http.StatusServiceUnavailable},
		{"not found", store.ErrNotFound, http.StatusInternalServerError},
		{"other", errors.New("boom"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := answerOf(AsError(tt.err).Code).status; got != tt.want {
			t.Errorf("%s: AsError(%v) is answered %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

// The clock is synctest's: a check's place against the TTL does not
// depend on how fast the machine runs the checks.
func TestHealthChecksAreCachedForAFewSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pings atomic.Int64
		fail := atomic.Bool{}
		p := CachePing(PingFunc(func(context.Context) error {
			pings.Add(1)
			if fail.Load() {
				return errors.New("down")
			}
			return nil
		}), HealthCacheTTL)
		for range 100 {
			if err := p.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		fail.Store(true)
		time.Sleep(HealthCacheTTL - time.Millisecond)
		if err := p.Ping(t.Context()); err != nil {
			t.Fatalf("a check within the TTL = %v, want the kept healthy result", err)
		}
		if n := pings.Load(); n != 1 {
			t.Fatalf("%d pings for 101 checks within the TTL, want 1", n)
		}
		time.Sleep(time.Millisecond)
		if err := p.Ping(t.Context()); err == nil {
			t.Fatal("a failing store is reported healthy after the TTL")
		}
		if n := pings.Load(); n != 2 {
			t.Fatalf("%d pings, want 2", n)
		}
	})
}

// TestEveryRecordOfARequestNamesEachKeyOnce: the request record, and the
// records of a failed or panicking request, hold each key once (a key
// twice reads back as one of its values).
func TestEveryRecordOfARequestNamesEachKeyOnce(t *testing.T) {
	h, logs := newTestHandler(t, Options{Auth: BearerTokens(map[string]string{"tok": "acme"})})
	auth := map[string]string{"Authorization": "Bearer tok"}
	serve(h, "GET", "/v1/chats/c1/whoami", nil, auth)
	serve(h, "POST", "/v1/chats/c1/echo", strings.NewReader("{"), auth)
	serve(h, "GET", "/v1/panic", nil, auth)
	serve(h, "GET", "/v1/chats/c1/whoami", nil, nil)
	msgs := map[string]int{}
	for _, rec := range logkeys.Check(t, logs.Bytes()) {
		msg, _ := rec["msg"].(string)
		msgs[msg]++
	}
	if msgs["request"] != 4 || msgs["request failed"] < 2 || msgs["handler panicked"] != 1 {
		t.Fatalf("records %v", msgs)
	}
}
