// Package openapitest checks HTTP exchanges against the API's OpenAPI
// document (api.OpenAPI), for the tests that drive the real server: every
// answer must be one the document describes for its request (its status,
// headers, media type, and a JSON body valid against its schema by JSON
// Schema 2020-12, the dialect of OpenAPI 3.1), and a request the document
// does not describe must be refused, so the document cannot drift from the
// handlers.
package openapitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/durachat/durachat/shared/api"
)

// docURL names the document among the JSON Schema compiler's resources.
const docURL = "urn:durachat:openapi.json"

// Validator checks requests and answers against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	// raw is the document as JSON values, where answers' schemas are
	// found by JSON pointer and compiled by the JSON Schema compiler.
	raw map[string]any

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by location in the document
	seen     map[string]bool               // "METHOD /path/template" of each exchange checked
	answers  map[string]int                // "METHOD /path/template STATUS": exchanges checked
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
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI))
	if err != nil {
		return nil, fmt.Errorf("openapitest: reading the document: %w", err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	if err := compiler.AddResource(docURL, raw); err != nil {
		return nil, fmt.Errorf("openapitest: %w", err)
	}
	return &Validator{
		doc: doc, router: router, raw: raw.(map[string]any),
		compiler: compiler, schemas: make(map[string]*jsonschema.Schema),
		seen: make(map[string]bool), answers: make(map[string]int),
	}, nil
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
// (a 4xx); every answer to an operation, a refusal too, must be one the
// document lists for it, with its headers and body.
func (v *Validator) Check(ctx context.Context, x Exchange) error {
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		route, params, err = v.findRest(req)
	}
	if err != nil {
		if x.Status == http.StatusNotFound || x.Status == http.StatusMethodNotAllowed {
			return v.checkError(x)
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
	if len(x.RequestBody) > 0 && (!isJSON(ct) || route.Operation.RequestBody != nil && !takesJSON(route.Operation)) {
		// Bodies other than JSON (JSONL, image bytes, whatever their
		// Content-Type says) are checked for their media type only; their
		// schemas are strings.
		if err := declaredRequest(route.Operation, ct); err != nil {
			return err
		}
		reqOpts := *opts
		reqOpts.ExcludeRequestBody = true
		reqIn.Options = &reqOpts
	}
	v.mu.Lock()
	v.answers[fmt.Sprintf("%s %s %d", route.Method, route.Path, x.Status)]++
	v.mu.Unlock()
	if err := openapi3filter.ValidateRequest(ctx, reqIn); err != nil && (x.Status < 400 || x.Status >= 500) {
		return fmt.Errorf("%s %s: the document refuses the request, the server answered %d: %w", x.Request.Method, x.Request.URL.Path, x.Status, err)
	}
	// A request the document refuses and the server refused is answered
	// as the document describes that refusal, like any other answer.
	// kin-openapi checks the status is listed and the headers; the body
	// is checked by a JSON Schema 2020-12 validator (checkBody).
	resOpts := *opts
	resOpts.ExcludeResponseBody = true
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 x.Status,
		Header:                 x.Header,
		Options:                &resOpts,
	}
	resIn.SetBodyBytes(x.Body)
	if err := openapi3filter.ValidateResponse(ctx, resIn); err != nil {
		return fmt.Errorf("%s %s: answer %d %.300s: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	if err := v.checkBody(route.Path, route.Method, x); err != nil {
		return fmt.Errorf("%s %s: answer %d %.300s: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	return nil
}

// findRest routes a request whose last parameter spans the rest of the
// path (a key of a link or upload target, slashes and all): OpenAPI's path
// parameters are one segment, so the rest is sent as one.
func (v *Validator) findRest(req *http.Request) (*routers.Route, map[string]string, error) {
	err := errors.New("no matching operation was found")
	for _, template := range v.doc.Paths.InMatchingOrder() {
		prefix, last, ok := strings.Cut(template, "{")
		if !ok || strings.Contains(last, "{") || !strings.HasSuffix(last, "}") {
			continue
		}
		rest, ok := strings.CutPrefix(req.URL.Path, prefix)
		if !ok || !strings.Contains(rest, "/") {
			continue
		}
		one := req.Clone(req.Context())
		one.URL.RawPath = prefix + url.PathEscape(rest)
		one.URL.Path = prefix + rest
		route, params, ferr := v.router.FindRoute(one)
		if ferr == nil {
			params[strings.TrimSuffix(last, "}")] = rest
			return route, params, nil
		}
	}
	return nil, nil, err
}

// checkBody checks an answer's body is one the document describes for its
// operation and status: none where it describes none, else of a media type
// it lists, and a JSON body valid against that type's schema.
func (v *Validator) checkBody(path, method string, x Exchange) error {
	loc, res := v.response(path, method, x.Status)
	if res == nil {
		return fmt.Errorf("status %d the document does not describe", x.Status)
	}
	content, _ := res["content"].(map[string]any)
	ct := x.Header.Get("Content-Type")
	if len(x.Body) == 0 && (len(content) == 0 || method == http.MethodHead || x.Status == http.StatusNotModified) {
		return nil
	}
	if len(x.Body) == 0 && ct == "" {
		// An empty body of a declared type is checked as that type: no
		// lines of JSONL are an export of nothing, no JSON is no answer.
		return fmt.Errorf("an empty answer without a type; the document describes a body (%s)", strings.Join(slices.Sorted(maps.Keys(content)), ", "))
	}
	if len(content) == 0 {
		return fmt.Errorf("a body of type %q where the document describes none", ct)
	}
	key := mediaKey(content, ct)
	if key == "" {
		return fmt.Errorf("an answer of type %q the document does not describe", ct)
	}
	if !isJSON(ct) {
		// Other bodies (event streams, image bytes, text) are checked
		// for their media type only.
		return nil
	}
	return v.validate(loc+"/content/"+escapePointer(key)+"/schema", x.Body)
}

// response finds the document's answer to method on path with status (the
// code, its class such as 4XX, or default), following a reference; loc is
// its JSON pointer.
func (v *Validator) response(path, method string, status int) (loc string, res map[string]any) {
	op, _ := lookup(v.raw, "paths", path, strings.ToLower(method)).(map[string]any)
	responses, _ := op["responses"].(map[string]any)
	for _, code := range []string{strconv.Itoa(status), strconv.Itoa(status/100) + "XX", "default"} {
		r, ok := responses[code].(map[string]any)
		if !ok {
			continue
		}
		loc = "#/paths/" + escapePointer(path) + "/" + strings.ToLower(method) + "/responses/" + code
		if ref, ok := r["$ref"].(string); ok {
			loc = ref
			r, _ = lookup(v.raw, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...).(map[string]any)
		}
		return loc, r
	}
	return "", nil
}

// validate checks body, as JSON, against the schema at loc in the document.
func (v *Validator) validate(loc string, body []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("an answer of JSON type that is not JSON: %w", err)
	}
	v.mu.Lock()
	sch, ok := v.schemas[loc]
	if !ok {
		sch, err = v.compiler.Compile(docURL + loc)
		if err != nil {
			v.mu.Unlock()
			return fmt.Errorf("compiling the document's schema at %s: %w", loc, err)
		}
		v.schemas[loc] = sch
	}
	v.mu.Unlock()
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("the body does not match the document's schema (%s): %w", loc, err)
	}
	return nil
}

// lookup walks doc's objects by keys (JSON pointer tokens, unescaped).
func lookup(doc any, keys ...string) any {
	for _, k := range keys {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~")]
	}
	return doc
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// mediaKey is the key of content that describes contentType: the type
// itself, its range (image/*), or */*; "" when none does.
func mediaKey(content map[string]any, contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	major, _, _ := strings.Cut(mt, "/")
	for _, k := range []string{mt, major + "/*", "*/*"} {
		if _, ok := content[k]; ok {
			return k
		}
	}
	return ""
}

// Answers counts the exchanges checked by operation and status
// ("GET /v1/chats/{chat}/view 200").
func (v *Validator) Answers() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int, len(v.answers))
	for k, n := range v.answers {
		out[k] = n
	}
	return out
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

// checkError checks an answer outside any operation (an unknown route, a
// method a path does not take, a request the document refuses) is the
// API's error shape, the document's Error schema.
func (v *Validator) checkError(x Exchange) error {
	if x.Request.Method == http.MethodHead && len(x.Body) == 0 {
		return nil
	}
	if !isJSON(x.Header.Get("Content-Type")) {
		return fmt.Errorf("%s %s: answer %d of type %q is not the error shape: %.300s", x.Request.Method, x.Request.URL.Path, x.Status, x.Header.Get("Content-Type"), x.Body)
	}
	if err := v.validate("#/components/schemas/Error", x.Body); err != nil {
		return fmt.Errorf("%s %s: answer %d is not the error shape: %.300s: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	return nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func takesJSON(op *openapi3.Operation) bool {
	// Content.Get would find */* too: a body of any bytes is not JSON.
	return op.RequestBody != nil && op.RequestBody.Value.Content["application/json"] != nil
}

func declaredRequest(op *openapi3.Operation, contentType string) error {
	if op.RequestBody == nil || op.RequestBody.Value.Content.Get(contentType) == nil {
		return fmt.Errorf("a request body of type %q the document does not describe", contentType)
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
// ends and returns its base URL: every exchange through it is checked by v
// as Handler checks it.
func Proxy(t testing.TB, v *Validator, upstream string) string {
	t.Helper()
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

// Uncovered lists the operations of the document no exchange checked so
// far reached, but those in skip.
func (v *Validator) Uncovered(skip ...string) []string {
	seen := v.Seen()
	var out []string
	for _, op := range v.Operations() {
		if !seen[op] && !slices.Contains(skip, op) {
			out = append(out, op)
		}
	}
	slices.Sort(out)
	return out
}

// Suite runs a test package (m.Run) whose exchanges v checks, then tells
// what they covered: operations reached, answers (an operation and a
// status) and exchanges. When the whole package ran (no -run) and passed,
// an operation of the document no exchange reached, but those in skip (the
// ones its server does not serve), fails it: a route the tests stopped
// calling is a route whose answers nothing checks.
func Suite(m *testing.M, v *Validator, skip ...string) int {
	code := m.Run()
	answers := v.Answers()
	exchanges := 0
	for _, n := range answers {
		exchanges += n
	}
	ops := len(v.Operations())
	uncovered := v.Uncovered(skip...)
	fmt.Printf("openapi: %d exchanges checked against the document: %d of its %d operations, %d answers (operation and status)\n",
		exchanges, len(v.Seen()), ops, len(answers))
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" && len(uncovered) > 0 {
		fmt.Printf("FAIL: openapi: no test reached %s\n", strings.Join(uncovered, ", "))
		return 1
	}
	return code
}
