// Package lambdahttp serves an http.Handler as a Lambda function behind an
// API Gateway HTTP API (payload format 2.0), so the handlers that serve
// locally run unchanged in Lambda. The event conversion is
// aws-lambda-go-api-proxy's; this package adds what durachat needs around
// it: API Gateway's request id, JSON errors for undecodable events, and the
// tenant from the JWT authorizer's claims.
package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// IntegrationTimeout is API Gateway's limit on an HTTP API integration,
// counted from when it received the request (a cold start included).
const IntegrationTimeout = 30 * time.Second

// Margin is how long before IntegrationTimeout a request that is still
// running is cut off: its context is cancelled and the caller gets the
// documented JSON 503 with Retry-After, not API Gateway's bare 503.
const Margin = 2 * time.Second

// Lambda's limits on a synchronous invocation: the request event and the
// response document, as the Lambda service counts them (the JSON it
// receives and the JSON the runtime sends back).
const (
	MaxRequestPayload  = 6 * 1024 * 1024   // 6,291,456 bytes
	MaxResponsePayload = 6*1024*1024 + 100 // 6,291,556 bytes
)

// Adapter turns API Gateway v2 events into requests for one http.Handler.
type Adapter struct {
	handler  http.Handler
	accessor core.RequestAccessorV2
}

// New adapts h.
func New(h http.Handler) *Adapter { return &Adapter{handler: h} }

// Invoke is the adapter as a typed Lambda handler (lambda.NewHandler's
// kind): the event decoded and the answer encoded by the runtime. Start
// runs Handler, which answers the same from the raw JSON.
func (a *Adapter) Invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	resp, req, err := a.answer(ctx, ev)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if n := PayloadSize(resp); n > MaxResponsePayload {
		return a.tooLarge(ev, req, n)
	}
	return resp, nil
}

// answer serves ev and returns the handler's response, over Lambda's
// limit or not, and the request it served.
func (a *Adapter) answer(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, *http.Request, error) {
	w := core.NewProxyResponseWriterV2()
	req, err := a.request(ctx, ev)
	if err != nil {
		// The event itself is unusable: answer as the handler would, in JSON.
		bare, _ := http.NewRequestWithContext(api.WithRequestID(ctx, ev.RequestContext.RequestID), http.MethodGet, "/", nil)
		if id := ev.RequestContext.RequestID; id != "" {
			w.Header().Set("X-Request-Id", id)
		}
		api.WriteError(w, bare, err)
		resp, err := w.GetProxyResponse()
		return resp, bare, err
	}
	ctx, cancel := context.WithDeadline(req.Context(), deadline(ev, time.Now()))
	defer cancel()
	gw := &guardWriter{ResponseWriter: w}
	if !serve(ctx, a.handler, gw, req.WithContext(ctx)) {
		// Too late: answer 503 from a fresh response. The handler's context
		// is cancelled; whatever it still writes goes nowhere.
		late := core.NewProxyResponseWriterV2()
		if id := ev.RequestContext.RequestID; id != "" {
			late.Header().Set("X-Request-Id", id)
		}
		api.WriteError(late, req, api.Unavailable(fmt.Errorf("the request was still running %v before the gateway's %v timeout: %w", Margin, IntegrationTimeout, ctx.Err())))
		resp, err := late.GetProxyResponse()
		return resp, req, err
	}
	if !gw.wrote {
		// A handler that wrote nothing answered 200, as net/http would.
		gw.WriteHeader(http.StatusOK)
	}
	resp, err := w.GetProxyResponse()
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, req, fmt.Errorf("lambdahttp: building the response: %w", err)
	}
	if req.Method == http.MethodHead {
		// A HEAD answer has headers only, as net/http sends it.
		resp.Body, resp.IsBase64Encoded = "", false
	}
	return resp, req, nil
}

// tooLarge answers in place of an answer of n bytes, over Lambda's
// response limit: Lambda would drop it and API Gateway answer a bare
// 500, so the adapter answers the same status in JSON, with the sizes in
// the log. The routes clamp their answers, so this is a bug to fix.
func (a *Adapter) tooLarge(ev events.APIGatewayV2HTTPRequest, req *http.Request, n int) (events.APIGatewayV2HTTPResponse, error) {
	big := core.NewProxyResponseWriterV2()
	if id := ev.RequestContext.RequestID; id != "" {
		big.Header().Set("X-Request-Id", id)
	}
	api.WriteError(big, req, fmt.Errorf("lambdahttp: the answer is %d bytes, over Lambda's response limit of %d", n, MaxResponsePayload))
	return big.GetProxyResponse()
}

// Handler is the adapter as the function's lambda.Handler, over the
// invocation's raw JSON: the event's body is unescaped, and the answer's
// escaped, at memory speed (DecodeEvent, AppendResponse), where the
// runtime's encoding/json passes over a body of images two or three
// times; the answer is measured against Lambda's limit as it is sent.
func (a *Adapter) Handler() lambda.Handler { return payloads{a} }

type payloads struct{ a *Adapter }

func (p payloads) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ev, err := DecodeEvent(payload)
	if err != nil {
		return nil, err
	}
	resp, req, err := p.a.answer(ctx, ev)
	if err != nil {
		return nil, err
	}
	out := AppendResponse(make([]byte, 0, len(resp.Body)+len(resp.Body)/16+1024), resp)
	if len(out) > MaxResponsePayload {
		big, err := p.a.tooLarge(ev, req, len(out))
		if err != nil {
			return nil, err
		}
		out = AppendResponse(nil, big)
	}
	return out, nil
}

// DecodeEvent decodes a payload 2.0 event as json.Unmarshal does: the
// body with rawjson (one validity pass, then unescaped at memory speed),
// the other fields with encoding/json.
func DecodeEvent(payload []byte) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	if !rawjson.Valid(payload) {
		return ev, json.Unmarshal(payload, &ev) // its syntax error
	}
	rest := []byte{'{'}
	var body rawjson.Value
	isObject := rawjson.Fields(payload, func(k string, v rawjson.Value) {
		// encoding/json matches a field's name regardless of case, and
		// the last of a name given twice stands.
		if strings.EqualFold(k, "body") {
			body = v
			return
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(append(rawjson.AppendKey(rest, k), ':'), v...)
	})
	text, isText := body.Text()
	if !isObject || !body.IsNull() && !isText {
		return ev, json.Unmarshal(payload, &ev) // its type error
	}
	if err := json.Unmarshal(append(rest, '}'), &ev); err != nil {
		return ev, err
	}
	ev.Body = text
	return ev, nil
}

// AppendResponse appends resp to dst as the runtime would send it: JSON
// without HTML escaping (see Start), the body escaped at memory speed.
func AppendResponse(dst []byte, resp events.APIGatewayV2HTTPResponse) []byte {
	body := resp.Body
	resp.Body = ""
	head, _ := rawjson.Of(resp) // maps of strings and a number always encode
	// The body goes where encoding/json puts it. Outside strings, whose
	// quotes are escaped, the field's bytes can stand only as a header's
	// key and value (in headers, which comes first) or as the body's.
	at := bytes.LastIndex(head, []byte(`"body":""`))
	if at < 0 { // a body left out when empty: encoding/json's way, whole
		resp.Body = body
		whole, _ := rawjson.Of(resp)
		return append(dst, whole...)
	}
	at += len(`"body":`)
	dst = rawjson.AppendString(append(dst, head[:at]...), body)
	return append(dst, head[at+len(`""`):]...)
}

// PayloadSize is the size of resp as the runtime sends it to Lambda
// (AppendResponse).
func PayloadSize(resp events.APIGatewayV2HTTPResponse) int {
	return len(AppendResponse(nil, resp))
}

// Start runs the adapter as the Lambda function's handler (Handler),
// encoding its answers without HTML escaping: escaped, every <, > and &
// of an answer would take six bytes of the response limit instead of one.
func (a *Adapter) Start() { lambda.Start(a.Handler()) }

// deadline is Margin before API Gateway gives up on the request: from when
// it received it, or from now when the event does not say (or says a time
// after now).
func deadline(ev events.APIGatewayV2HTTPRequest, now time.Time) time.Time {
	received := now
	if ms := ev.RequestContext.TimeEpoch; ms > 0 && time.UnixMilli(ms).Before(now) {
		received = time.UnixMilli(ms)
	}
	return received.Add(IntegrationTimeout - Margin)
}

// serve runs h and reports whether it returned before ctx ended. A panic
// in h is raised again in the caller, as if h had run there.
func serve(ctx context.Context, h http.Handler, w http.ResponseWriter, r *http.Request) bool {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		h.ServeHTTP(w, r)
	}()
	select {
	case v := <-done:
		if v != nil {
			panic(v)
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *Adapter) request(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	if ev.RequestContext.HTTP.Method == "" {
		return nil, api.BadRequest("", "the event is not an API Gateway HTTP API (payload 2.0) request: no method")
	}
	// The accessor decodes a base64 body itself; decoding it here first
	// too would hold a second copy of a body of up to 10 MB.
	req, err := a.accessor.EventToRequestWithContext(ctx, ev)
	if err != nil {
		var corrupt base64.CorruptInputError
		if ev.IsBase64Encoded && errors.As(err, &corrupt) {
			return nil, api.BadRequest("", "the request body is marked base64 but does not decode: %v", err)
		}
		return nil, api.BadRequest("", "the request cannot be read: %v", err)
	}
	// The accessor builds the request over a bytes.Reader, so
	// ContentLength is the body's length and api.DecodeJSON reads it into
	// one buffer of that size (TestRequestDeclaresTheBodyLength).
	if id := ev.RequestContext.RequestID; id != "" {
		req = req.WithContext(api.WithRequestID(req.Context(), id))
	}
	return req, nil
}

// Claims are the JWT authorizer's claims of the request, when API Gateway
// authorized it with a JWT.
func Claims(ctx context.Context) (map[string]string, bool) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(ctx)
	if !ok || rc.Authorizer == nil || rc.Authorizer.JWT == nil {
		return nil, false
	}
	return rc.Authorizer.JWT.Claims, true
}

// ClaimTenant authenticates a request by the JWT authorizer's claim named
// claim: API Gateway has verified the token, so the claim is the tenant. A
// token without the claim is refused. A request API Gateway did not
// authorize with a JWT (no authorizer configured) goes to fallback, or is
// refused when fallback is nil.
func ClaimTenant(claim string, fallback api.Authenticator) api.Authenticator {
	return api.AuthFunc(func(r *http.Request) (string, error) {
		claims, ok := Claims(r.Context())
		if !ok {
			if fallback != nil {
				return fallback.Authenticate(r)
			}
			return "", api.Unauthorized("no JWT authorizer vouched for this request and no bearer tokens are configured")
		}
		tenant := claims[claim]
		if tenant == "" {
			return "", api.Unauthorized("the token has no %q claim to name the tenant", claim)
		}
		if err := store.CheckTenant(tenant); err != nil {
			return "", api.Unauthorized("the token's %q claim cannot name a tenant: %v", claim, err)
		}
		return tenant, nil
	})
}

// guardWriter notes whether the handler answered at all.
type guardWriter struct {
	http.ResponseWriter
	wrote bool
}

func (g *guardWriter) WriteHeader(code int) {
	g.wrote = true
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriter.Write(b)
}
