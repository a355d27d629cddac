// Package api is durachat's HTTP skeleton: JSON errors, body limits, the
// caller's tenant, chat ids, and the handler shape every route uses. The same
// http.Handler serves locally and in Lambda.
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
	"regexp"
	"strconv"
	"time"

	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// MaxBody is the default request body limit: API Gateway's 10 MB payload.
const MaxBody = 10 << 20

// RetryAfter is what a 503 tells a caller to wait.
const RetryAfter = 10 * time.Second

// Error is an API error answer: {"error": {"code", "message", "field"}}.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// BadRequest is a 400 naming the field at fault.
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 with Retry-After.
func Unavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "a backing service is unavailable; retry later", RetryAfter: RetryAfter, Err: err}
}

// Marshal encodes v as WriteJSON does: without HTML escaping, so text such
// as "<chat>" is kept as written rather than inflated sixfold, and without
// a trailing newline.
func Marshal(v any) (json.RawMessage, error) {
	raw, err := rawjson.Of(v)
	return json.RawMessage(raw), err
}

// SetDataHeaders marks an answer of contentType that carries a tenant's
// data: never read as another type (nosniff), never kept by a cache
// between the tenant and durachat or in a shared browser (no-store). Every
// JSON answer has them (WriteJSON).
func SetDataHeaders(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	SetDataHeaders(w.Header(), "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// AsError maps any error to the API error it is answered with: an *Error as
// itself, an outage (store.IsOutage) as 503, anything else 500.
func AsError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var fe *pi.FieldError
	if errors.As(err, &fe) {
		return BadRequest(fe.Field, "%s", fe.Error())
	}
	if store.IsOutage(err) {
		return Unavailable(err)
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Err: err}
}

// WriteError answers err as JSON and logs it with the request.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	ae := AsError(err)
	if ae.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="durachat"`)
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((ae.RetryAfter+time.Second-1)/time.Second)))
	}
	level := slog.LevelInfo
	if ae.Status >= 500 {
		level = slog.LevelError
	}
	Logger(r.Context()).Log(r.Context(), level, "request failed", "status", ae.Status, "code", ae.Code, "field", ae.Field, "err", ae.Error())
	body := map[string]any{"code": ae.Code, "message": ae.Message}
	if ae.Field != "" {
		body["field"] = ae.Field
	}
	WriteJSON(w, ae.Status, map[string]any{"error": body})
}

// DecodeJSON reads r's body (bounded by MaxBody) into v. A malformed body or
// a field of the wrong type is a 400 naming the field; a body over the limit
// is a 413.
func DecodeJSON(r *http.Request, v any) error {
	data, err := ReadBody(r)
	if err != nil {
		return err
	}
	return Unmarshal(data, v)
}

// ReadBody reads a request's JSON body whole, within MaxBody, into one
// buffer of its own that nothing writes to afterwards: values decoded
// from it may be slices of it. An empty body is a 400, one over MaxBody a
// 413.
func ReadBody(r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, MaxBody)
	data, err := readBody(body, r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return nil, BadRequest("", "reading body: %v", err)
	}
	if len(data) == 0 {
		return nil, BadRequest("", "request body is empty; a JSON object is expected")
	}
	return data, nil
}

// Unmarshal decodes a request body read by ReadBody into v, as
// DecodeJSON does: what is wrong with it is a 400 naming the field.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		var fe *pi.FieldError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &fe):
			return BadRequest(fe.Field, "%s", fe.Error())
		case errors.As(err, &te) && te.Field == "":
			return BadRequest("", "the request body must be a JSON object, not %s", te.Value)
		case errors.As(err, &te):
			return BadRequest(te.Field, "field %q must be %s, not %s", te.Field, te.Type, te.Value)
		case errors.As(err, &se):
			return BadRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
		default:
			return BadRequest("", "malformed JSON: %v", err)
		}
	}
	return nil
}

// readBody reads a whole body. A body of declared length is read into one
// buffer of that size (bounded by MaxBody), where io.ReadAll would grow its
// buffer step by step and leave several copies for the collector; a body
// of unknown or wrong length still reads correctly, only with growing.
func readBody(body io.Reader, length int64) ([]byte, error) {
	var buf bytes.Buffer
	if length > 0 {
		// The extra MinRead is room for the read that finds the end.
		buf.Grow(int(min(length, MaxBody)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
}

// MaxSeq bounds a message seq or node index a request names: the largest
// integer every JSON reader holds exactly (2^53 - 1), far past any log,
// and far enough from the int64 limit that nothing computed from it
// overflows.
const MaxSeq = 1<<53 - 1

// QueryInt reads the whole-number query parameter name of r: def when it
// is absent, else a number from lo to hi, or a 400 naming the parameter.
func QueryInt(r *http.Request, name string, lo, hi, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, BadRequest(name, "%s must be a whole number from %d to %d, not %q", name, lo, hi, v)
	}
	return n, nil
}

var chatID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Chat returns the request's {chat} path value, or a 400 when it is not a
// chat id (CheckChat).
func Chat(r *http.Request) (string, error) {
	c := r.PathValue("chat")
	if err := CheckChat(c); err != nil {
		return "", err
	}
	return c, nil
}

// CheckChat refuses, as a 400 naming "chat", an id that is not 1-128 of
// [A-Za-z0-9._-], or is "." or "..": clients and proxies rewrite those
// path segments, so such a chat could not be reached reliably. Every way
// into a chat (a route's path, the command line's import) applies it.
func CheckChat(c string) error {
	if !chatID.MatchString(c) {
		return BadRequest("chat", "chat id %q must be 1-128 characters of A-Z a-z 0-9 . _ -", c)
	}
	if c == "." || c == ".." {
		return BadRequest("chat", "chat id %q is a dot segment, which HTTP clients rewrite; pick another", c)
	}
	return nil
}

// ValidChat reports whether s is a well-formed chat id (CheckChat).
func ValidChat(s string) bool { return CheckChat(s) == nil }

// TenantChat returns the authenticated caller's tenant and the request's
// {chat}. The server's auth layer sets the tenant; a handler mounted without
// it answers 401 rather than act for no one.
func TenantChat(r *http.Request) (tenant, chat string, err error) {
	tenant = Tenant(r.Context())
	if tenant == "" {
		return "", "", Unauthorized("the request has no authenticated tenant")
	}
	chat, err = Chat(r)
	if err != nil {
		return "", "", err
	}
	return tenant, chat, nil
}

type ctxKey int

const (
	tenantKey ctxKey = iota
	loggerKey
	requestIDKey
)

// WithTenant records the authenticated caller's tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

// Tenant is the authenticated caller's tenant; never from the request body.
func Tenant(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey).(string)
	return t
}

// WithLogger attaches a request-scoped logger.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// Logger is the request's logger, or slog.Default.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// HandlerFunc is a route that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle registers fn on mux under a Go 1.22 pattern ("POST /v1/chats/{chat}/x").
func Handle(mux *http.ServeMux, pattern string, fn HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			WriteError(w, r, err)
		}
	})
}

// Routes is a feature that registers its routes on a mux.
type Routes interface {
	Register(mux *http.ServeMux)
}
