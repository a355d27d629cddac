package stack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/rawjson"
)

func gatewayOf(routes ...Route) *Gateway {
	tpl := &Template{Routes: routes, Integrations: map[string]Integration{"I": {Function: "F", PayloadFormat: "2.0", TimeoutMillis: 30000}}}
	return NewGateway(tpl, map[string]*Function{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestARouteMissingFromTheTemplateIsAPIGatewaysNotFound(t *testing.T) {
	g := gatewayOf(Route{Key: "GET /healthz", Integration: "I", AuthType: "NONE"})
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/chats/c/view", nil))
	if w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != `{"message":"Not Found"}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("POST on a GET route: %d", w.Code)
	}
}

func TestRoutesMatchTheMostSpecificKeyThenDefault(t *testing.T) {
	g := gatewayOf(
		Route{Name: "param", Key: "POST /v1/chats/{chat}/hooks/before-request"},
		Route{Name: "literal", Key: "POST /v1/chats/fixed/hooks/before-request"},
		Route{Name: "any", Key: "ANY /v1/{proxy+}"},
		Route{Name: "default", Key: "$default"},
	)
	for _, c := range []struct{ method, path, want, param string }{
		{"POST", "/v1/chats/c1/hooks/before-request", "param", "c1"},
		{"POST", "/v1/chats/fixed/hooks/before-request", "literal", ""},
		{"GET", "/v1/chats/c1/view", "any", ""},
		{"GET", "/healthz", "default", ""},
	} {
		r, params := g.match(c.method, c.path)
		if r == nil || r.Name != c.want || params["chat"] != c.param {
			t.Errorf("%s %s: %+v %v, want %s", c.method, c.path, r, params, c.want)
		}
	}
}

func TestAJWTRouteRefusesARequestWithoutAToken(t *testing.T) {
	g := gatewayOf(Route{Key: "$default", Integration: "I", AuthType: "JWT", Authorizer: "A"})
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/chats/c/view", nil))
	// API Gateway's own answer, as docs/api.md quotes it.
	if w.Code != http.StatusUnauthorized || strings.TrimSpace(w.Body.String()) != `{"message":"Unauthorized"}` || w.Header().Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("%d %s %v", w.Code, w.Body, w.Header())
	}
}

func TestClaimsReachTheFunctionAsStrings(t *testing.T) {
	got := claimStrings(map[string]any{"sub": "t1", "exp": float64(1700000000), "groups": []any{"a", "b"}})
	if got["sub"] != "t1" || got["exp"] != "1700000000" || got["groups"] != "[a b]" {
		t.Fatalf("%v", got)
	}
}

// TestEveryViewReachesTheViewFunction: the template's view route sends
// every view, waiting or not (a route never matches the query string), to
// the view function, and the other memory routes to the memory function.
func TestEveryViewReachesTheViewFunction(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", nil, Physical{})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGateway(tpl, map[string]*Function{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v1/chats/c1/view", "ViewFunction"},
		{"POST", "/v1/chats/c1/messages", "MemoryFunction"},
		{"GET", "/v1/chats/c1/status", "MemoryFunction"},
		{"GET", "/v1/chats/c1/view/extra", "MemoryFunction"},
		{"POST", "/v1/chats/c1/view", "MemoryFunction"},
	} {
		r, _ := g.match(c.method, c.path)
		if r == nil || tpl.Integrations[r.Integration].Function != c.want {
			t.Errorf("%s %s: route %+v, want the %s", c.method, c.path, r, c.want)
		}
	}
}

// A function's answer becomes HTTP as API Gateway makes it: a payload 2.0
// response by its fields, JSON without statusCode as the body of a 200,
// anything else a 500.
func TestAFunctionsAnswerIsTurnedIntoHTTPAsAPIGatewayDoes(t *testing.T) {
	for _, c := range []struct {
		name, out   string
		status      int
		body, ctype string
	}{
		{"payload 2.0", `{"statusCode":201,"headers":{"Content-Type":"text/plain"},"body":"made"}`, 201, "made", "text/plain"},
		{"base64 body", `{"statusCode":200,"body":"aGk=","isBase64Encoded":true}`, 200, "hi", ""},
		{"a body with escapes", `{"statusCode":200,"body":"{\"a\":\"\u00e9\\n\"}"}`, 200, `{"a":"é\n"}`, ""},
		{"a null body", `{"statusCode":204,"body":null}`, 204, "", ""},
		{"JSON without statusCode", `{"ids":[1,2]}`, 200, `{"ids":[1,2]}`, "application/json"},
		{"a null statusCode", `{"statusCode":null,"ids":[1]}`, 200, `{"statusCode":null,"ids":[1]}`, "application/json"},
		{"a body that is not text", `{"statusCode":200,"body":12}`, 500, `{"message":"Internal Server Error"}`, "application/json"},
		{"a JSON array", `[1,2]`, 200, `[1,2]`, "application/json"},
		{"statusCode of the wrong type", `{"statusCode":"200","body":"x"}`, 500, `{"message":"Internal Server Error"}`, "application/json"},
		{"statusCode out of range", `{"statusCode":99,"body":"x"}`, 500, `{"message":"Internal Server Error"}`, "application/json"},
		{"not JSON", `Task failed`, 500, `{"message":"Internal Server Error"}`, "application/json"},
		{"a base64 body that is not base64", `{"statusCode":200,"body":"@@","isBase64Encoded":true}`, 500, `{"message":"Internal Server Error"}`, "application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if got := writeResponse(w, []byte(c.out), "req-1"); got != c.status || w.Code != c.status {
				t.Fatalf("status %d (written %d), want %d", got, w.Code, c.status)
			}
			if got := strings.TrimSpace(w.Body.String()); got != c.body {
				t.Errorf("body %q, want %q", got, c.body)
			}
			if c.ctype != "" && w.Header().Get("Content-Type") != c.ctype {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), c.ctype)
			}
		})
	}
}

// An invocation's payload is a function error only when it is one, as
// the runtime writes it; an answer that names errorType in its body is
// an answer.
func TestAFunctionErrorIsToldFromAnAnswer(t *testing.T) {
	for _, c := range []struct {
		name, out string
		isError   bool
		errorType string
	}{
		{"the runtime's error payload", `{"errorMessage":"boom","errorType":"errorString"}`, true, "errorString"},
		{"a payload 2.0 answer", `{"statusCode":200,"body":"made"}`, false, ""},
		{"an answer whose body names errorType", `{"statusCode":200,"body":"{\"errorType\":\"x\"}"}`, false, ""},
		{"an answer with errorType and statusCode", `{"statusCode":502,"errorType":"x"}`, false, ""},
		{"not JSON", `Task failed "errorType"`, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fe, ok := asFunctionError([]byte(c.out))
			if ok != c.isError || fe.ErrorType != c.errorType {
				t.Fatalf("asFunctionError = %+v, %v; want error %v of type %q", fe, ok, c.isError, c.errorType)
			}
		})
	}
}

// answerOfImages is a function's payload 2.0 answer shaped like
// before-request's: a JSON body of about 2 MB, nearly all of it base64
// images, encoded as the Lambda runtime encodes it.
func answerOfImages(b *testing.B) []byte {
	img := make([]byte, 300<<10)
	for i := range img {
		img[i] = byte(i * 7919 >> 3)
	}
	var body strings.Builder
	body.WriteString(`{"messages":[{"role":"user","content":[`)
	for i := range 5 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"type":"image","data":"%s","mimeType":"image/png"}`, base64.StdEncoding.EncodeToString(img))
	}
	body.WriteString(`]}]}`)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: body.String()}); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// BenchmarkGatewayAnswerOfImages is the stack's way from an invocation's
// answer to the HTTP response: the function-error check and the payload
// 2.0 conversion. Compare BenchmarkGatewayAnswerOfImagesFloor.
func BenchmarkGatewayAnswerOfImages(b *testing.B) {
	out := answerOfImages(b)
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if _, isErr := asFunctionError(out); isErr {
			b.Fatal("an answer taken for an error")
		}
		if writeResponse(discardResponse{}, out, "req-1") != http.StatusOK {
			b.Fatal("not a 200")
		}
	}
}

// BenchmarkGatewayAnswerOfImagesFloor is what no gateway can skip on the
// same answer: one JSON validity pass (rawjson.Valid, the fastest the
// project has), the body copied once out of its
// JSON string (a copy of the answer's size stands in for the unescaping)
// and written.
func BenchmarkGatewayAnswerOfImagesFloor(b *testing.B) {
	out := answerOfImages(b)
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if !rawjson.Valid(out) {
			b.Fatal("not JSON")
		}
		body := bytes.Clone(out)
		discardResponse{}.Write(body)
	}
}

// discardResponse is an http.ResponseWriter that keeps nothing.
type discardResponse struct{}

func (discardResponse) Header() http.Header               { return http.Header{} }
func (discardResponse) Write(p []byte) (int, error)       { return len(p), nil }
func (discardResponse) WriteString(s string) (int, error) { return len(s), nil }
func (discardResponse) WriteHeader(int)                   {}
