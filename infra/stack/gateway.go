package stack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/rawjson"
)

// MaxAPIPayload is an HTTP API's limit on a request body: 10 MB.
const MaxAPIPayload = 10 * 1024 * 1024

// Gateway emulates an API Gateway HTTP API ($default stage) over the
// template's routes, integrations and JWT authorizers: it matches a route
// (a request no route matches is a 404), authorizes it, invokes the
// integration's function with a payload 2.0 event and converts its answer.
// API Gateway's own answers are its JSON messages: 401 Unauthorized, 404
// Not Found, 413 for a body over 10 MB, 500 when the invocation fails
// (a function error, a payload over Lambda's 6 MB), 503 when the
// integration times out.
type Gateway struct {
	routes       []gatewayRoute
	fallback     *gatewayRoute // $default
	integrations map[string]Integration
	functions    map[string]*Function
	verifiers    map[string]*Verifier
	logger       *slog.Logger
}

type gatewayRoute struct {
	Route
	method   string // "" for ANY
	segments []string
}

// NewGateway serves tpl's API with functions (by logical id).
func NewGateway(tpl *Template, functions map[string]*Function, logger *slog.Logger) *Gateway {
	g := &Gateway{integrations: tpl.Integrations, functions: functions, verifiers: map[string]*Verifier{}, logger: logger}
	for name, a := range tpl.Authorizers {
		g.verifiers[name] = NewVerifier(a)
	}
	for _, r := range tpl.Routes {
		gr := gatewayRoute{Route: r}
		if r.Key == "$default" {
			g.fallback = &gr
			continue
		}
		method, path, _ := strings.Cut(r.Key, " ")
		if method != "ANY" {
			gr.method = method
		}
		gr.segments = strings.Split(strings.Trim(path, "/"), "/")
		g.routes = append(g.routes, gr)
	}
	// The most specific route first: more literal segments, then a method
	// over ANY, then no greedy variable.
	sort.SliceStable(g.routes, func(i, j int) bool { return g.routes[i].rank() > g.routes[j].rank() })
	return g
}

func (r gatewayRoute) rank() int {
	n := 0
	for _, s := range r.segments {
		switch {
		case strings.HasSuffix(s, "+}"):
		case strings.HasPrefix(s, "{"):
			n += 2
		default:
			n += 4
		}
	}
	n *= 4
	if r.method != "" {
		n += 2
	}
	return n
}

// match returns the route for method and path and its path parameters.
func (g *Gateway) match(method, path string) (*gatewayRoute, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range g.routes {
		r := &g.routes[i]
		if r.method != "" && r.method != method {
			continue
		}
		if params, ok := r.matchPath(segs); ok {
			return r, params
		}
	}
	return g.fallback, nil
}

func (r *gatewayRoute) matchPath(segs []string) (map[string]string, bool) {
	params := map[string]string{}
	for i, want := range r.segments {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(want, "{"), "+}"); ok && strings.HasPrefix(want, "{") {
			if i >= len(segs) {
				return nil, false
			}
			params[name] = strings.Join(segs[i:], "/")
			return params, true
		}
		if i >= len(segs) {
			return nil, false
		}
		if strings.HasPrefix(want, "{") && strings.HasSuffix(want, "}") {
			if segs[i] == "" {
				return nil, false
			}
			params[want[1:len(want)-1]] = segs[i]
			continue
		}
		if want != segs[i] {
			return nil, false
		}
	}
	return params, len(segs) == len(r.segments)
}

func message(w http.ResponseWriter, status int, text string, requestID string) {
	w.Header().Set("Apigw-Requestid", requestID)
	writeJSON(w, status, map[string]string{"message": text})
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	requestID := randomID(12)
	status := g.serve(w, r, requestID)
	g.logger.Info("gateway", "method", r.Method, "path", r.URL.Path, "status", status, "request_id", requestID, "duration_ms", time.Since(start).Milliseconds())
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string) int {
	route, params := g.match(r.Method, r.URL.Path)
	if route == nil {
		message(w, http.StatusNotFound, "Not Found", requestID)
		return http.StatusNotFound
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxAPIPayload+1))
	if err != nil {
		message(w, http.StatusBadRequest, "Bad Request", requestID)
		return http.StatusBadRequest
	}
	if len(body) > MaxAPIPayload {
		message(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large", requestID)
		return http.StatusRequestEntityTooLarge
	}
	var claims map[string]any
	if route.AuthType == "JWT" {
		v := g.verifiers[route.Authorizer]
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if v == nil || token == "" {
			w.Header().Set("Www-Authenticate", "Bearer")
			message(w, http.StatusUnauthorized, "Unauthorized", requestID)
			return http.StatusUnauthorized
		}
		if claims, err = v.Verify(r.Context(), strings.TrimSpace(token)); err != nil {
			g.logger.Info("gateway: token refused", "request_id", requestID, "err", err)
			w.Header().Set("Www-Authenticate", `Bearer error="invalid_token"`)
			message(w, http.StatusUnauthorized, "Unauthorized", requestID)
			return http.StatusUnauthorized
		}
	}
	in := g.integrations[route.Integration]
	fn := g.functions[in.Function]
	if fn == nil || in.PayloadFormat != "2.0" {
		message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
		return http.StatusInternalServerError
	}
	ev := event(r, route, params, body, claims, requestID)
	payload, err := json.Marshal(ev)
	if err != nil {
		message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
		return http.StatusInternalServerError
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(in.TimeoutMillis)*time.Millisecond)
	defer cancel()
	out, err := fn.Invoke(ctx, payload)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		g.logger.Warn("gateway: integration timed out", "request_id", requestID, "err", err)
		message(w, http.StatusServiceUnavailable, "Service Unavailable", requestID)
		return http.StatusServiceUnavailable
	case err != nil:
		g.logger.Warn("gateway: invocation failed", "request_id", requestID, "err", err)
		message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
		return http.StatusInternalServerError
	}
	return writeResponse(w, out, requestID)
}

// event builds the payload 2.0 event of r.
func event(r *http.Request, route *gatewayRoute, params map[string]string, body []byte, claims map[string]any, requestID string) events.APIGatewayV2HTTPRequest {
	now := time.Now()
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					cookies = append(cookies, strings.TrimSpace(c))
				}
			}
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	// API Gateway names the scheme the client reached it at (https
	// there); the function's request URL says https whatever it is.
	headers["x-forwarded-proto"] = "http"
	if r.TLS != nil {
		headers["x-forwarded-proto"] = "https"
	}
	headers["content-length"] = strconv.Itoa(len(body))
	if len(body) == 0 {
		delete(headers, "content-length")
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              route.Key,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     route.Key,
			AccountID:    AccountID,
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(params) > 0 {
		ev.PathParameters = params
	}
	if claims != nil {
		jwt := &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claimStrings(claims)}
		if scope, ok := claims["scope"].(string); ok && scope != "" {
			jwt.Scopes = strings.Fields(scope)
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: jwt}
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) && utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

// isText tells the content types API Gateway passes as text.
func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "xml") ||
		mt == "application/javascript" || mt == "application/x-www-form-urlencoded"
}

// writeResponse converts a function's payload 2.0 answer. An answer that
// is JSON without statusCode is the body of a 200, as API Gateway infers.
func writeResponse(w http.ResponseWriter, out []byte, requestID string) int {
	// One validity pass (rawjson.Valid, at memory speed over the base64
	// an answer of images holds), then the fields are split and the body
	// unescaped at memory speed too.
	if !rawjson.Valid(out) {
		message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
		return http.StatusInternalServerError
	}
	fields, isObject := rawjson.FieldMap(out)
	if !isObject || fields["statusCode"].IsNull() {
		return writeBareJSON(w, out, requestID)
	}
	resp, err := payloadResponse(fields)
	if err != nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
		return http.StatusInternalServerError
	}
	body := resp.Body
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			message(w, http.StatusInternalServerError, "Internal Server Error", requestID)
			return http.StatusInternalServerError
		}
		body = string(b)
	}
	h := w.Header()
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("Apigw-Requestid", requestID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	io.WriteString(w, body)
	return resp.StatusCode
}

// payloadResponse reads a payload 2.0 response from its fields: the body
// as text, the small fields with encoding/json.
func payloadResponse(fields map[string]rawjson.Value) (events.APIGatewayV2HTTPResponse, error) {
	var resp events.APIGatewayV2HTTPResponse
	for key, into := range map[string]any{"statusCode": &resp.StatusCode, "headers": &resp.Headers,
		"multiValueHeaders": &resp.MultiValueHeaders, "cookies": &resp.Cookies, "isBase64Encoded": &resp.IsBase64Encoded} {
		if v := fields[key]; v != nil {
			if err := json.Unmarshal(v, into); err != nil {
				return resp, fmt.Errorf("the answer's %s: %w", key, err)
			}
		}
	}
	if body := fields["body"]; !body.IsNull() {
		text, ok := body.Text()
		if !ok {
			return resp, errors.New("the answer's body is not a string")
		}
		resp.Body = text
	}
	return resp, nil
}

// writeBareJSON answers a JSON answer without statusCode as the body of a
// 200.
func writeBareJSON(w http.ResponseWriter, out []byte, requestID string) int {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", requestID)
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK
}
