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
	"strings"
	"time"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// MaxBody is the default request body limit: API Gateway's 10 MB payload.
const MaxBody = 10 << 20

// answer is how an error code is answered over HTTP.
type answer struct {
	status     int
	retryAfter time.Duration // sent as Retry-After when not zero
}

// answers maps each error code (package fault) to the HTTP status it is
// answered with and, for a code that asks the caller to come back, the
// Retry-After it is told. This is the one place a code becomes a status.
var answers = map[string]answer{
	fault.BadRequest:       {status: http.StatusBadRequest},
	fault.Unauthorized:     {status: http.StatusUnauthorized},
	fault.Forbidden:        {status: http.StatusForbidden},
	fault.NotFound:         {status: http.StatusNotFound},
	fault.MethodNotAllowed: {status: http.StatusMethodNotAllowed},
	fault.Conflict:         {status: http.StatusConflict},
	// A chat's deletion takes seconds; its id then names a new chat.
	fault.Deleting:    {status: http.StatusConflict, retryAfter: 5 * time.Second},
	fault.Expired:     {status: http.StatusGone},
	fault.TooLarge:    {status: http.StatusRequestEntityTooLarge},
	fault.Internal:    {status: http.StatusInternalServerError},
	fault.Unavailable: {status: http.StatusServiceUnavailable, retryAfter: 10 * time.Second},
}

// answerOf is the answer to code; an unknown code is a bug, answered 500.
func answerOf(code string) answer {
	if a, ok := answers[code]; ok {
		return a
	}
	return answers[fault.Internal]
}

// BadRequest is a 400 naming the field at fault.
func BadRequest(field, format string, args ...any) *fault.Error {
	return &fault.Error{Code: fault.BadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CheckUTF8 refuses JSON whose strings hold bytes that are not UTF-8, with
// a 400 naming the string by its path within field (where data stands in
// the request, "" for the body): JSON text is UTF-8 (RFC 8259 §8.1), and
// what durachat keeps reads back as it was sent, so such bytes are
// refused rather than replaced by U+FFFD as encoding/json would.
func CheckUTF8(field string, data []byte) error {
	path, bad := rawjson.InvalidUTF8(data)
	if !bad {
		return nil
	}
	f := strings.TrimPrefix(field+path, ".")
	what := f
	if what == "" {
		what = "the body"
	}
	return &fault.Error{Code: fault.BadRequest, Field: f,
		Message: what + ": holds bytes that are not UTF-8; JSON text is UTF-8 (RFC 8259 §8.1), and durachat refuses them rather than change what it was sent"}
}

// NotFound is a 404.
func NotFound(format string, args ...any) *fault.Error {
	return &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 with Retry-After.
func Unavailable(err error) *fault.Error {
	return &fault.Error{Code: fault.Unavailable, Message: "a backing service is unavailable; retry later", Err: err}
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

// AsError maps any error to the *fault.Error it is answered with: one in
// err's chain as itself, an outage (store.IsOutage) as unavailable,
// anything else internal.
func AsError(err error) *fault.Error {
	if fe, ok := errors.AsType[*fault.Error](err); ok {
		return fe
	}
	if store.IsOutage(err) {
		return Unavailable(err)
	}
	return &fault.Error{Code: fault.Internal, Message: "internal error", Err: err}
}

// WriteError answers err as JSON, with the status of its code, and logs it
// with the request. A refused request (a 4xx) is told the error's whole
// text, its cause included; a failure (a 5xx) is told Message alone.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	fe := AsError(err)
	a := answerOf(fe.Code)
	if a.status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", bearerChallenge)
	}
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((a.retryAfter+time.Second-1)/time.Second)))
	}
	level, message := slog.LevelInfo, fe.Error()
	if a.status >= 500 {
		level, message = slog.LevelError, fe.Message
	}
	Logger(r.Context()).Log(r.Context(), level, "request failed", "status", a.status, "code", fe.Code, "field", fe.Field, "err", fe.Error())
	body := map[string]any{"code": fe.Code, "message": message}
	if fe.Field != "" {
		body["field"] = fe.Field
	}
	WriteJSON(w, a.status, map[string]any{"error": body})
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
// 413, one that is not UTF-8 a 400 naming the string (CheckUTF8).
func ReadBody(r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, MaxBody)
	data, err := readBody(body, r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &fault.Error{Code: fault.TooLarge, Message: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return nil, BadRequest("", "reading body: %v", err)
	}
	if len(data) == 0 {
		return nil, BadRequest("", "request body is empty; a JSON object is expected")
	}
	if err := CheckUTF8("", data); err != nil {
		return nil, err
	}
	return data, nil
}

// Unmarshal decodes a request body read by ReadBody into v, as
// DecodeJSON does: what is wrong with it is a 400 naming the field.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		var fe *fault.Error
		var se *json.SyntaxError
		switch {
		case errors.As(err, &fe):
			return fe
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

// RetryAfter is how long a caller answered with code is told to wait
// before it tries again (Retry-After), or 0.
func RetryAfter(code string) time.Duration { return answerOf(code).retryAfter }
