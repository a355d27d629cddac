// Package openapitest checks HTTP exchanges against the API's OpenAPI
// document (api.OpenAPI), for the tests that drive the real server: every
// answer must be one the document describes for its request, and a request
// the document does not describe must be refused, so the document cannot
// drift from the handlers.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/durachat/durachat/shared/api"
)

// Validator checks requests and answers against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "METHOD /path/template" of each exchange checked
}

// New loads and validates api.OpenAPI.
func New() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("openapitest: loading the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapitest: the document is invalid: %w", err)
	}
	// Routes match whatever host the test server listens on.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: routing the document: %w", err)
	}
	return &Validator{doc: doc, router: router, seen: make(map[string]bool)}, nil
}

// Exchange is one request and its answer, bodies whole.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// Check reports how the exchange departs from the document, or nil. A
// request the document does not describe (an unknown route, a body or
// parameter its schema refuses) passes only when the server refused it too
// (a 4xx); an answer must be one the document lists for the operation, with
// its headers and body.
func (v *Validator) Check(ctx context.Context, x Exchange) error {
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		if x.Status == http.StatusNotFound || x.Status == http.StatusMethodNotAllowed {
			return checkError(x)
		}
		return fmt.Errorf("%s %s: no operation in the document (%v), answered %d", x.Request.Method, x.Request.URL.Path, err, x.Status)
	}
	v.mu.Lock()
	v.seen[route.Method+" "+route.Path] = true
	v.mu.Unlock()

	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	reqIn := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	ct := x.Request.Header.Get("Content-Type")
	if len(x.RequestBody) > 0 && !isJSON(ct) && takesJSON(route.Operation) && declaredRequest(route.Operation, ct) != nil {
		// The server reads a JSON body as JSON whatever its Content-Type
		// says (curl -d sends a form type), and so does the document.
		req.Header.Set("Content-Type", "application/json")
		ct = "application/json"
	}
	if len(x.RequestBody) > 0 && !isJSON(ct) {
		// Bodies other than JSON (JSONL, image bytes) are checked for their
		// media type only; their schemas are strings.
		if err := declaredRequest(route.Operation, ct); err != nil {
			return err
		}
		reqOpts := *opts
		reqOpts.ExcludeRequestBody = true
		reqIn.Options = &reqOpts
	}
	if err := openapi3filter.ValidateRequest(ctx, reqIn); err != nil {
		if x.Status >= 400 && x.Status < 500 {
			// The document refuses the request and so did the server.
			return checkError(x)
		}
		return fmt.Errorf("%s %s: the document refuses the request, the server answered %d: %w", x.Request.Method, x.Request.URL.Path, x.Status, err)
	}

	resOpts := *opts
	if ct := x.Header.Get("Content-Type"); len(x.Body) > 0 && !isJSON(ct) {
		if err := declaredAnswer(route.Operation, x.Status, ct); err != nil {
			return fmt.Errorf("%s %s: %w", x.Request.Method, x.Request.URL.Path, err)
		}
		resOpts.ExcludeResponseBody = true
	}
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 x.Status,
		Header:                 x.Header,
		Options:                &resOpts,
	}
	resIn.SetBodyBytes(x.Body)
	if x.Request.Method == http.MethodHead {
		resIn.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(ctx, resIn); err != nil {
		return fmt.Errorf("%s %s: answer %d %.300s: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	return nil
}

// Seen lists the operations ("GET /v1/chats/{chat}/view") checked so far.
func (v *Validator) Seen() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	seen := make(map[string]bool, len(v.seen))
	for k := range v.seen {
		seen[k] = true
	}
	return seen
}

// Operations lists every operation of the document.
func (v *Validator) Operations() []string {
	var ops []string
	for path, item := range v.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	return ops
}

// checkError checks an answer outside any operation is the API's error shape.
func checkError(x Exchange) error {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if x.Request.Method == http.MethodHead && len(x.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(x.Body, &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
		return fmt.Errorf("%s %s: answer %d is not the error shape: %.300s", x.Request.Method, x.Request.URL.Path, x.Status, x.Body)
	}
	return nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func takesJSON(op *openapi3.Operation) bool {
	return op.RequestBody != nil && op.RequestBody.Value.Content.Get("application/json") != nil
}

func declaredRequest(op *openapi3.Operation, contentType string) error {
	if op.RequestBody == nil || op.RequestBody.Value.Content.Get(contentType) == nil {
		return fmt.Errorf("a request body of type %q the document does not describe", contentType)
	}
	return nil
}

func declaredAnswer(op *openapi3.Operation, status int, contentType string) error {
	res := op.Responses.Status(status)
	if res == nil {
		return fmt.Errorf("status %d the document does not describe", status)
	}
	if res.Value.Content.Get(contentType) == nil {
		return fmt.Errorf("an answer %d of type %q the document does not describe", status, contentType)
	}
	return nil
}

// Handler serves next and fails t on every exchange the document does not
// describe.
func Handler(t testing.TB, v *Validator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		res := rec.Result()
		answer, _ := io.ReadAll(res.Body)
		if err := v.Check(r.Context(), Exchange{Request: r, RequestBody: body, Status: res.StatusCode, Header: res.Header, Body: answer}); err != nil {
			t.Errorf("openapi: %v", err)
		}
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(answer)
	})
}

// Proxy serves a checking proxy in front of the server at upstream until t
// ends and returns its base URL: every exchange through it is checked as
// Handler checks it.
func Proxy(t testing.TB, upstream string) string {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
	srv := httptest.NewServer(Handler(t, v, rp))
	t.Cleanup(srv.Close)
	return srv.URL
}
