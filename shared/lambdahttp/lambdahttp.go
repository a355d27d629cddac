// Package lambdahttp serves an http.Handler as a Lambda function behind an
// API Gateway HTTP API (payload format 2.0), so the handlers that serve
// locally run unchanged in Lambda. The event conversion is
// aws-lambda-go-api-proxy's; this package adds what durachat needs around
// it: API Gateway's request id, JSON errors for undecodable events, and the
// tenant from the JWT authorizer's claims.
package lambdahttp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/durachat/durachat/shared/api"
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

// Invoke is the Lambda handler: pass it to lambda.Start.
func (a *Adapter) Invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	w := core.NewProxyResponseWriterV2()
	req, err := a.request(ctx, ev)
	if err != nil {
		// The event itself is unusable: answer as the handler would, in JSON.
		bare, _ := http.NewRequestWithContext(api.WithRequestID(ctx, ev.RequestContext.RequestID), http.MethodGet, "/", nil)
		if id := ev.RequestContext.RequestID; id != "" {
			w.Header().Set("X-Request-Id", id)
		}
		api.WriteError(w, bare, err)
		return w.GetProxyResponse()
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
		return late.GetProxyResponse()
	}
	if !gw.wrote {
		// A handler that wrote nothing answered 200, as net/http would.
		gw.WriteHeader(http.StatusOK)
	}
	resp, err := w.GetProxyResponse()
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("lambdahttp: building the response: %w", err)
	}
	if n := PayloadSize(resp); n > MaxResponsePayload {
		// Lambda would drop it and API Gateway answer a bare 500: answer
		// the same status in JSON, with the sizes in the log. The routes
		// clamp their answers, so this is a bug to fix.
		big := core.NewProxyResponseWriterV2()
		if id := ev.RequestContext.RequestID; id != "" {
			big.Header().Set("X-Request-Id", id)
		}
		api.WriteError(big, req, fmt.Errorf("lambdahttp: the answer is %d bytes, over Lambda's response limit of %d", n, MaxResponsePayload))
		return big.GetProxyResponse()
	}
	return resp, nil
}

// PayloadSize is the size of resp as the runtime sends it to Lambda: JSON
// without HTML escaping (see Start), where a body's quotes, backslashes and
// control characters grow by their escapes.
func PayloadSize(resp events.APIGatewayV2HTTPResponse) int {
	n := 128 + jsonLen(resp.Body) // field names, status, flags
	for k, v := range resp.Headers {
		n += jsonLen(k) + jsonLen(v) + 4
	}
	for k, vs := range resp.MultiValueHeaders {
		n += jsonLen(k) + 4
		for _, v := range vs {
			n += jsonLen(v) + 1
		}
	}
	for _, c := range resp.Cookies {
		n += jsonLen(c) + 1
	}
	return n
}

// jsonLen is the length of s as a JSON string without HTML escaping.
func jsonLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// Start runs the adapter as the Lambda function's handler, encoding its
// answers without HTML escaping: escaped, every <, > and & of an answer
// would take six bytes of the response limit instead of one.
func (a *Adapter) Start() {
	lambda.StartWithOptions(a.Invoke, lambda.WithSetEscapeHTML(false))
}

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
