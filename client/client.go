// Package client is a Go client for the durachat HTTP API: the image hooks,
// the transcript and the memory of a chat.
//
// A Client holds the server's base URL and credentials; Client.Chat gives a
// handle on one chat, whose methods are the routes under /v1/chats/{chat}:
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken(token))
//	chat := c.Chat("demo")
//	ids, err := chat.Append(ctx, "turn-1-user", client.UserText("Why does the login page fail?"))
//	view, err := chat.View(ctx, client.WaitTurn)
//
// Every method takes a context whose deadline bounds the whole call,
// retries included. A 503 (a store or the model is down) is retried after
// its Retry-After, at most a few times, but only where repeating the call
// is safe: reads, the hooks, the memory tools and settings, and appends
// that carry a receipt. An append without a receipt is never repeated,
// since a repeat would log its messages twice. Every API error is an
// *Error carrying the answer's status, code and field.
//
// The answers the server writes from the same Go types, such as View,
// Status, Tree, ChatList and the restoration of BeforeRequestResult, are
// those of package wire, which the server imports too.
//
// The package is a module of its own that depends on the standard library
// only and builds with Go 1.22 or later: adding it to a program brings
// nothing of the server's.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for the retry of a 503 or of a lost answer.
const (
	// DefaultAttempts is how many times a retry-safe call is sent at most.
	DefaultAttempts = 4
	// DefaultMaxWait caps one wait between attempts, whatever Retry-After says.
	DefaultMaxWait = 30 * time.Second
	// fallbackWait is the wait when a 503 has no usable Retry-After.
	fallbackWait = time.Second
	// maxAnswer bounds an answer read into memory: before-request may
	// inline up to 64 MiB of images (budgetBytes) on top of the request.
	maxAnswer = 256 << 20
)

// Client calls one durachat server. It is safe for concurrent use.
type Client struct {
	base     string
	token    string
	http     *http.Client
	attempts int
	maxWait  time.Duration
	// bodyLimit is the body size past which inline images are uploaded.
	bodyLimit int
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer credential (a JWT in AWS, a
// configured token locally). Without it no Authorization header is sent,
// which the local server without tokens accepts.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends requests with hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry sets how many times a retry-safe call is sent at most when the
// server answers 503 or its answer is lost (1 turns retries off), and the
// longest wait between two attempts.
func WithRetry(attempts int, maxWait time.Duration) Option {
	return func(c *Client) { c.attempts, c.maxWait = attempts, maxWait }
}

// New returns a client of the server at baseURL (scheme, host and an
// optional path prefix, such as an API Gateway stage).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[/prefix]", baseURL)
	}
	c := &Client{
		base:      strings.TrimSuffix(u.String(), "/"),
		http:      http.DefaultClient,
		attempts:  DefaultAttempts,
		maxWait:   DefaultMaxWait,
		bodyLimit: DefaultBodyLimit,
	}
	for _, o := range opts {
		o(c)
	}
	if c.attempts < 1 {
		c.attempts = 1
	}
	return c, nil
}

// Health checks GET /healthz: nil when the server's stores answer.
func (c *Client) Health(ctx context.Context) error {
	return c.call(ctx, call{method: http.MethodGet, path: "/healthz", retry: true}, nil)
}

// Error is an error answer of the API: {"error": {"code", "message", "field"}}
// with its HTTP status. An answer that is not durachat's JSON (a proxy's
// error page) gets the code of its status and the start of its body as
// message.
type Error struct {
	Status  int    // HTTP status, such as 400 or 503
	Code    string // the API's code, such as "bad_request" or "unavailable"
	Message string
	Field   string // the field at fault, when the server names one
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id, also on the server's logs.
	RequestID string
}

// The API's error codes.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeDeleting         = "deleting" // a 409 for a chat being deleted; retry after Retry-After
	CodeExpired          = "expired"
	CodeTooLarge         = "too_large"
	CodeInternal         = "internal"
	CodeUnavailable      = "unavailable"
)

func (e *Error) Error() string {
	s := fmt.Sprintf("durachat: %d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// call is one route's request.
type call struct {
	method string
	path   string // already escaped
	query  url.Values
	body   any // marshalled as JSON when not nil
	// raw, when set, is the body as it is (JSONL), sent instead of body.
	raw []byte
	// retry marks a call that is safe to repeat after a 503.
	retry bool
	// accept404 takes a 404 that carries a tool result as the answer (a
	// memory tool's error for the model, such as search being off).
	accept404 bool
}

// call sends c and decodes a 2xx JSON answer into out (when not nil). An
// answer cut off on its way is a lost answer, sent again like one that
// never came (see send).
func (c *Client) call(ctx context.Context, k call, out any) error {
	var data []byte
	var resp *http.Response
	for attempt := 1; ; attempt++ {
		var err error
		if resp, err = c.send(ctx, k); err != nil {
			return err
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		resp.Body.Close()
		if err == nil {
			break
		}
		err = fmt.Errorf("durachat: %s %s: reading the answer: %w", k.method, k.path, err)
		if !k.retry || attempt >= c.attempts || c.wait(ctx, lostAnswerWait(attempt)) != nil {
			return err
		}
	}
	if resp.StatusCode == http.StatusNotFound && k.accept404 && isToolResult(data) {
		return json.Unmarshal(data, out)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("durachat: %s %s: decoding the answer: %w", k.method, k.path, err)
	}
	return nil
}

// send sends k, retrying a 503 when k is safe to repeat, and returns the
// first answer that is not a retried 503. The caller closes its body; a
// non-2xx answer is left for the caller to turn into an *Error.
func (c *Client) send(ctx context.Context, k call) (*http.Response, error) {
	body := k.raw
	if body == nil && k.body != nil {
		var err error
		if body, err = marshal(k.body); err != nil {
			return nil, fmt.Errorf("durachat: %s %s: encoding the body: %w", k.method, k.path, err)
		}
	}
	u := c.base + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	attempts := 1
	if k.retry {
		attempts = c.attempts
	}
	for attempt := 1; ; attempt++ {
		req, err := c.request(ctx, k, u, body)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if !c.sendAgain(ctx, k, attempt, attempts, err) {
				return nil, fmt.Errorf("durachat: %s %s: %w", k.method, k.path, err)
			}
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || attempt >= attempts {
			return resp, nil
		}
		wait := min(retryAfter(resp.Header.Get("Retry-After"), time.Now()), c.maxWait)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return resp, nil // no time left to wait: the 503 is the answer
		}
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := c.wait(ctx, wait); err != nil {
			return nil, fmt.Errorf("durachat: %s %s: waiting to retry a 503: %w", k.method, k.path, err)
		}
	}
}

// sendAgain reports whether k, which got no answer, is to be sent again,
// after waiting for it. The server may not have had the request, or its
// answer was lost on the way (a dropped connection, a proxy that timed
// out): a call safe to repeat is sent again, and a repeated append with
// its receipt logs nothing twice. A refused connection reached no server,
// so nothing was lost: it is the answer.
func (c *Client) sendAgain(ctx context.Context, k call, attempt, attempts int, err error) bool {
	if !k.retry || attempt >= attempts || errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
		return false
	}
	return c.wait(ctx, lostAnswerWait(attempt)) == nil
}

// request is one attempt's request of k to u.
func (c *Client) request(ctx context.Context, k call, u string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, k.method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("durachat: %s %s: %w", k.method, k.path, err)
	}
	switch {
	case k.raw != nil:
		req.Header.Set("Content-Type", "application/x-ndjson")
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// lostAnswerWait is the wait before sending again a call whose answer did
// not come: 250 ms, doubling, at most DefaultMaxWait.
func lostAnswerWait(attempt int) time.Duration {
	return min(250*time.Millisecond<<(attempt-1), DefaultMaxWait)
}

// wait waits d, or returns ctx's error when it ends first.
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(min(d, c.maxWait))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return fallbackWait
	}
	if s, err := strconv.Atoi(h); err == nil {
		return max(time.Duration(s)*time.Second, 0)
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return fallbackWait
}

// apiError turns a non-2xx answer into an *Error.
func apiError(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	if h := resp.Header.Get("Retry-After"); h != "" {
		e.RetryAfter = retryAfter(h, time.Now())
	}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		return e
	}
	e.Code = codeOf(resp.StatusCode)
	e.Message = strings.TrimSpace(string(data[:min(len(data), 512)]))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// codeOf is the API's code for a status, for answers without one.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusGone:
		return CodeExpired
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return CodeUnavailable
	}
	return CodeInternal
}

// isToolResult reports whether data is a tool result rather than an error.
func isToolResult(data []byte) bool {
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	return json.Unmarshal(data, &probe) == nil && len(probe.Content) > 0
}

// marshal encodes v without HTML escaping, as the server does: "<chat>"
// stays as written.
func marshal(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// IsUnavailable reports whether err is a 503 from the server (after any
// retries): the call may work later.
func IsUnavailable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusServiceUnavailable
}
