package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images/imagestest"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/api/openapitest"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lambdahttp"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// function is one HTTP function wired as its main wires it
// (functions/*/main.go), served through the Lambda adapter.
type function struct {
	name    string
	handler lambda.Handler
	stores  app.Stores
}

// testIssuer is the issuer of the JWTs the functions of a test take.
const testIssuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Test"

func functions(t *testing.T) map[string]*function {
	return functionsAuth(t, api.SingleTenant("t"))
}

// functionsAuth is functions with auth naming the tenants, and upload
// targets on the embedded store's linker.
func functionsAuth(t *testing.T, auth api.Authenticator) map[string]*function {
	b := testenv.Embedded(t)
	stores := app.Stores{Table: b.Table, Blobs: b.Blobs, Linker: b.Linker, Queue: b.Queue, Receiver: b.Receiver}
	if u, ok := b.Linker.(store.Uploader); ok {
		stores.Uploader = u
	}
	imgs := stores.Images()
	restore := hooks.NewRestore(imgs, stores.Linker)
	restore.Bounded = true
	mem, err := memoryapi.New(config.Config{}, stores, memoryapi.Models{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string][]api.Routes{
		"restore": {restore},
		"offload": {hooks.NewOffload(imgs, mem.Chats), hooks.NewUploads(imgs, stores.Uploader, mem.Chats)},
		// As functions/memory serves them: the MCP endpoint stateless.
		"memory": append(mem.Routes(), mem.MCPRoutes(true)),
	}
	out := map[string]*function{}
	for name, rs := range routes {
		// As lambdafn.Function.Handler serves them where the API takes JWTs.
		h, err := app.Handler(slog.New(slog.DiscardHandler), auth, stores, rs, api.ProtectedResource{Issuer: testIssuer})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = &function{name: name, handler: lambdahttp.New(h).Handler(), stores: stores}
	}
	return out
}

// call invokes f with a POST of body, checking that the event is one
// Lambda takes and that the answer is one Lambda sends.
func (f *function) call(t *testing.T, path string, body []byte) (int, []byte, int) {
	t.Helper()
	resp, n := f.request(t, http.MethodPost, path, "", body)
	return resp.StatusCode, []byte(resp.Body), n
}

// request invokes f with a request of method, checking the event and the
// answer as call does; it returns the answer and its payload size.
func (f *function) request(t *testing.T, method, path, query string, body []byte) (events.APIGatewayV2HTTPResponse, int) {
	t.Helper()
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, RawQueryString: query, Body: string(body),
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "r", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}},
	}
	return f.send(t, ev)
}

// send invokes f with ev, checking that the event is one Lambda takes
// and that the answer is one Lambda sends; it returns the answer and its
// payload size.
func (f *function) send(t *testing.T, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, int) {
	t.Helper()
	path := ev.RawPath
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > lambdahttp.MaxRequestPayload {
		t.Fatalf("the test's event is %d bytes, over Lambda's %d", len(raw), lambdahttp.MaxRequestPayload)
	}
	// Through the handler the function runs (lambdahttp.Start), as Lambda
	// hands it the event's JSON and takes its answer's.
	out, err := f.handler.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > lambdahttp.MaxResponsePayload {
		t.Fatalf("%s %s answered %d bytes, over Lambda's %d", f.name, path, len(out), lambdahttp.MaxResponsePayload)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s %s answered what is not a payload 2.0 response: %v", f.name, path, err)
	}
	if err := checked.Check(context.Background(), exchangeOf(t, ev, resp)); err != nil {
		t.Errorf("openapi: %s function: %v", f.name, err)
	}
	return resp, len(out)
}

// checked checks every answer of the package's functions against the
// OpenAPI document; TestMain reports what they covered.
var checked *openapitest.Validator

// The functions serve neither the local server's links, upload targets
// and MCP streams nor the memory browser (served by the view function).
var notServedHere = []string{"GET /v1/links/{key}", "PUT /v1/uploads/{key}", "GET /v1/mcp", "GET /ui", "GET /ui/{file}"}

func TestMain(m *testing.M) {
	v, err := openapitest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	checked = v
	os.Exit(openapitest.Suite(m, v, notServedHere...))
}

// exchangeOf is the request of ev and the answer resp as a client of API
// Gateway sends and receives them.
func exchangeOf(t *testing.T, ev events.APIGatewayV2HTTPRequest, resp events.APIGatewayV2HTTPResponse) openapitest.Exchange {
	t.Helper()
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = b
	}
	target := ev.RawPath
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	req, err := http.NewRequest(ev.RequestContext.HTTP.Method, "https://gateway.test"+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	answer := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		answer = b
	}
	h := http.Header{}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return openapitest.Exchange{Request: req, RequestBody: body, Status: resp.StatusCode, Header: h, Body: answer}
}

// noisyPNG is imagestest.NoisyPNG in base64.
func noisyPNG(t *testing.T, seed uint64, w, h int) string {
	t.Helper()
	return base64.StdEncoding.EncodeToString(imagestest.NoisyPNG(seed, w, h))
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type obj = map[string]any
type list = []any

// nearLimit is the size a request or answer must reach to count as near
// Lambda's 6 MB.
const nearLimit = 5_500_000

func TestEachHTTPFunctionTakesARequestNear6MB(t *testing.T) {
	if testing.Short() {
		t.Skip("6 MB requests: not in -short")
	}
	t.Parallel()
	fns := functions(t)
	img := noisyPNG(t, 1, 600, 600) // about 1.9 MB of base64: stored as it is
	filler := func(n int) string { return strings.Repeat("the tool printed a long log line. ", n/34) }
	cases := []struct {
		fn, path string
		body     []byte
	}{
		{"restore", "/v1/chats/c/hooks/before-request", mustJSON(t, obj{"format": "pi", "request": obj{"messages": list{
			obj{"role": "user", "content": list{obj{"type": "text", "text": filler(5_800_000)}}}}}})},
		{"offload", "/v1/chats/c/hooks/after-tool", mustJSON(t, obj{"call": obj{"id": "1", "name": "shot"}, "bounds": obj{"maxBytes": 10_000_000, "maxLines": 10_000_000},
			"result": obj{"content": list{obj{"type": "text", "text": filler(4_300_000)}, obj{"type": "image", "mimeType": "image/png", "data": img}}}})},
		{"memory", "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": list{
			obj{"type": "text", "text": filler(4_300_000)}, obj{"type": "image", "mimeType": "image/png", "data": img}}}}})},
	}
	for _, c := range cases {
		t.Run(c.fn, func(t *testing.T) {
			if len(c.body) < nearLimit {
				t.Fatalf("the request is only %d bytes", len(c.body))
			}
			status, out, _ := fns[c.fn].call(t, c.path, c.body)
			if status != http.StatusOK {
				t.Fatalf("%d %.300s", status, out)
			}
		})
	}
}

func TestEachHTTPFunctionAnswersNear6MBWithinTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("6 MB answers: not in -short")
	}
	t.Parallel()
	fns := functions(t)
	// Five images of about 1.9 MB of base64 each: more than one answer holds.
	var imgs []string
	var content list
	for i := range 5 {
		imgs = append(imgs, noisyPNG(t, uint64(10+i), 600, 600))
		content = append(content, obj{"type": "image", "mimeType": "image/png", "data": imgs[i]})
	}
	// Stored through memory, in two appends (each under the request limit).
	mem := fns["memory"]
	for _, part := range []list{content[:3], content[3:]} {
		if status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": part}}})); status != http.StatusOK {
			t.Fatalf("storing images: %d %s", status, out)
		}
	}
	var refBlocks list
	for _, b64 := range imgs {
		refBlocks = append(refBlocks, obj{"type": "text", "text": "[image " + images.Name(b64) + "]"})
	}

	t.Run("restore clamps budgetBytes", func(t *testing.T) {
		body := mustJSON(t, obj{"format": "pi", "budgetBytes": 64 << 20, "request": obj{"messages": list{obj{"role": "user", "content": refBlocks}}}})
		status, out, n := fns["restore"].call(t, "/v1/chats/c/hooks/before-request", body)
		if status != http.StatusOK {
			t.Fatalf("%d %.300s", status, out)
		}
		var a struct {
			Restored   []string
			Unrestored []struct{ Name, Reason string }
		}
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Restored) < 2 || len(a.Unrestored) == 0 || a.Unrestored[0].Reason != hooks.ReasonBudget {
			t.Fatalf("restored %d, unrestored %+v: want the budget to stop it", len(a.Restored), a.Unrestored)
		}
		t.Logf("answer %d bytes", n)
	})
	t.Run("restore refuses a request that alone passes the limit", func(t *testing.T) {
		body := mustJSON(t, obj{"format": "pi", "request": obj{"messages": list{obj{"role": "user", "content": strings.Repeat("x", 6_050_000)}}}})
		status, out, _ := fns["restore"].call(t, "/v1/chats/c/hooks/before-request", body)
		if status != http.StatusRequestEntityTooLarge || !bytes.Contains(out, []byte(`"field":"request"`)) {
			t.Fatalf("%d %.300s, want 413 naming request", status, out)
		}
	})
	t.Run("offload echoes a result near 6 MB", func(t *testing.T) {
		text := strings.Repeat("x", 5_900_000)
		body := mustJSON(t, obj{"call": obj{"id": "1", "name": "cat"}, "result": obj{"content": list{obj{"type": "text", "text": text}}}})
		status, out, n := fns["offload"].call(t, "/v1/chats/c/hooks/after-tool", body)
		if status != http.StatusOK || n < nearLimit {
			t.Fatalf("%d, %d bytes: %.200s", status, n, out)
		}
	})
	t.Run("memory zoom pages its images", func(t *testing.T) {
		status, out, n := mem.call(t, "/v1/chats/c/tools/zoom", mustJSON(t, obj{"id": 0, "n": 1}))
		if status != http.StatusOK || !bytes.Contains(out, []byte("is not attached")) {
			t.Fatalf("%d, %d bytes: %.300s", status, n, out)
		}
		t.Logf("zoom answer %d bytes", n)
	})
}
