package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/store"
)

// HealthPattern is the route of the health check; it needs no credentials.
const HealthPattern = "GET /healthz"

// PingTimeout bounds a health check's store calls.
const PingTimeout = 3 * time.Second

// Pinger answers whether a backing store is reachable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingFunc adapts a function to Pinger.
type PingFunc func(ctx context.Context) error

// Ping calls f.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// HealthCacheTTL is how long a health check's result is reused: /healthz is
// anonymous, and a check costs a read of each store.
const HealthCacheTTL = 5 * time.Second

// CachePing returns a Pinger that pings p at most once per ttl and answers
// the checks in between with the last result; checks that arrive during a
// ping wait for it and share it. A ping cut short by its caller's context
// is not kept.
func CachePing(p Pinger, ttl time.Duration) Pinger {
	return &cachedPinger{p: p, ttl: ttl}
}

type cachedPinger struct {
	p   Pinger
	ttl time.Duration

	mu   sync.Mutex
	at   time.Time
	last error
}

func (c *cachedPinger) Ping(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		return c.last
	}
	err := c.p.Ping(ctx)
	if ctx.Err() == nil {
		c.at, c.last = time.Now(), err
	}
	return err
}

// Authenticator names the tenant of a request, or fails with an
// unauthorized *fault.Error (a 401).
type Authenticator interface {
	Authenticate(r *http.Request) (tenant string, err error)
}

// AuthFunc adapts a function to Authenticator.
type AuthFunc func(r *http.Request) (string, error)

// Authenticate calls f.
func (f AuthFunc) Authenticate(r *http.Request) (string, error) { return f(r) }

// Unauthorized is a 401; WriteError adds the WWW-Authenticate challenge.
func Unauthorized(format string, args ...any) *fault.Error {
	return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(format, args...)}
}

// SingleTenant authenticates every request as tenant: the local server with
// no tokens configured, which therefore listens on loopback only.
func SingleTenant(tenant string) Authenticator {
	return AuthFunc(func(*http.Request) (string, error) { return tenant, nil })
}

// BearerTokens authenticates "Authorization: Bearer <token>" against a map of
// token to tenant. Tokens are compared as SHA-256 digests in constant time,
// against every configured token, so timing tells nothing about them.
func BearerTokens(tokens map[string]string) Authenticator {
	type entry struct {
		sum    [sha256.Size]byte
		tenant string
	}
	entries := make([]entry, 0, len(tokens))
	for tok, tenant := range tokens {
		entries = append(entries, entry{sha256.Sum256([]byte(tok)), tenant})
	}
	return AuthFunc(func(r *http.Request) (string, error) {
		tok, ok := BearerToken(r)
		if !ok {
			return "", Unauthorized("an Authorization: Bearer <token> header is required")
		}
		sum := sha256.Sum256([]byte(tok))
		tenant := ""
		for _, e := range entries {
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
				tenant = e.tenant
			}
		}
		if tenant == "" {
			return "", Unauthorized("the bearer token is not valid")
		}
		return tenant, nil
	})
}

// BearerToken is the request's bearer token, if it sent one.
func BearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// WithRequestID records the request's id; the Lambda adapter sets API
// Gateway's, and the server generates one where none was set.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID is the request's id, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail.
	return hex.EncodeToString(b[:])
}

// Options configure NewHandler.
type Options struct {
	// Logger receives one JSON line per request; nil is slog.Default.
	Logger *slog.Logger
	// Auth names each request's tenant. Required.
	Auth Authenticator
	// MaxBody limits request bodies; 0 is MaxBody.
	MaxBody int64
	// Health is pinged by GET /healthz; nil answers 200 without pinging.
	Health Pinger
	// Routes are the authenticated routes.
	Routes []Routes
	// Public routes need no credentials: they carry their own proof (a
	// signed link) or tell nothing (the health check and the OpenAPI
	// description, always public).
	Public []Routes
}

// RegisterFunc adapts a function to Routes.
type RegisterFunc func(mux *http.ServeMux)

// Register calls f.
func (f RegisterFunc) Register(mux *http.ServeMux) { f(mux) }

// NewHandler is the one http.Handler every program serves, locally and in
// Lambda: it gives each request an id (echoed as X-Request-Id) and a logger,
// logs it, turns a panic into a 500, limits the body, authenticates the
// tenant (all routes but /healthz and /v1/openapi.json), and answers unknown routes and methods
// with JSON errors.
func NewHandler(o Options) (http.Handler, error) {
	if o.Auth == nil {
		return nil, errors.New("api: Options.Auth is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBody <= 0 {
		o.MaxBody = MaxBody
	}
	public, private := http.NewServeMux(), http.NewServeMux()
	Handle(public, HealthPattern, Health(o.Health))
	Handle(public, OpenAPIPattern, serveOpenAPI)
	for _, rs := range o.Public {
		rs.Register(public)
	}
	for _, rs := range o.Routes {
		rs.Register(private)
	}
	return &server{public: public, private: private, o: o}, nil
}

type server struct {
	public, private *http.ServeMux
	o               Options
}

// BodyLimit wraps h so the server limits the bodies of its requests to n
// bytes instead of Options.MaxBody: a route whose body is not a JSON
// request (the local server's upload targets) keeps its own limit here.
func BodyLimit(h http.Handler, n int64) http.Handler { return limitedHandler{h, n} }

type limitedHandler struct {
	http.Handler
	limit int64
}

// route picks the mux that serves r and the body limit of its route;
// pattern is "" when none does.
func (s *server) route(r *http.Request) (mux *http.ServeMux, pattern string, public bool, limit int64) {
	mux, public = s.public, true
	h, p := s.public.Handler(r)
	if p == "" {
		mux, public = s.private, false
		h, p = s.private.Handler(r)
	}
	limit = s.o.MaxBody
	if lh, ok := h.(limitedHandler); ok {
		limit = lh.limit
	}
	return mux, p, public, limit
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	id := RequestID(ctx)
	if id == "" {
		id = newRequestID()
		ctx = WithRequestID(ctx, id)
	}
	w.Header().Set("X-Request-Id", id)
	logger := s.o.Logger.With("request_id", id)
	ctx = WithLogger(ctx, logger)
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}

	mux, pattern, public, limit := s.route(r)
	tenant := ""
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			logger.Error("handler panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !sw.wrote {
				WriteError(sw, r, &fault.Error{Code: fault.Internal, Message: "internal error", Err: fmt.Errorf("panic: %v", v)})
			}
		}
		requestLine{pattern: pattern, tenant: tenant, start: start}.log(ctx, logger, r, sw)
	}()

	if pattern == "" {
		if err := s.slashedParameter(r); err != nil {
			WriteError(sw, r, err)
			return
		}
		s.unrouted(sw, r)
		return
	}
	if r.ContentLength > limit {
		WriteError(sw, r, &fault.Error{Code: fault.TooLarge, Message: fmt.Sprintf("request body over %d bytes", limit)})
		return
	}
	r.Body = http.MaxBytesReader(sw, r.Body, limit)
	if !public {
		var err error
		if tenant, err = s.authenticate(r); err != nil {
			if c, ok := s.o.Auth.(Challenger); ok && AsError(err).Code == fault.Unauthorized {
				sw.Header().Set("WWW-Authenticate", c.Challenge(r))
			}
			WriteError(sw, r, err)
			return
		}
		r = r.WithContext(WithLogger(WithTenant(r.Context(), tenant), logger.With("tenant", tenant)))
	}
	mux.ServeHTTP(sw, r)
}

// requestLine is what a request's log line says beside the request and
// its answer: the route it matched, its tenant, when it came.
type requestLine struct {
	pattern, tenant string
	start           time.Time
}

// log writes the one log line of a request: at error level when its
// answer is a 5xx.
func (l requestLine) log(ctx context.Context, logger *slog.Logger, r *http.Request, sw *statusWriter) {
	level := slog.LevelInfo
	if sw.status >= 500 {
		level = slog.LevelError
	}
	logger.LogAttrs(ctx, level, "request",
		slog.String("method", r.Method),
		slog.String("route", l.pattern),
		slog.String("path", r.URL.Path),
		slog.Int("status", sw.status),
		slog.Int64("bytes", sw.bytes),
		slog.Float64("duration_ms", float64(time.Since(l.start).Microseconds())/1000),
		slog.String("tenant", l.tenant),
	)
}

// authenticate is the tenant r's credentials name.
func (s *server) authenticate(r *http.Request) (string, error) {
	t, err := s.o.Auth.Authenticate(r)
	if err != nil {
		return "", err
	}
	// Whatever named it, a tenant follows the one rule that keeps its keys
	// and links well-formed.
	if terr := store.CheckTenant(t); terr != nil {
		return "", Unauthorized("this request's credentials name no valid tenant: %v", terr)
	}
	return t, nil
}

// slashedParameter is the 400 for a request that matches no route only
// because a path parameter is an encoded slash (%2F) alone: ServeMux takes
// such a segment for a trailing slash, so /v1/chats/%2F/view found no route
// where /v1/chats/a%2Fb/view reaches its handler and is refused naming
// chat. It names the parameter the same way; nil when the request matches
// no route either way.
func (s *server) slashedParameter(r *http.Request) error {
	escaped := r.URL.EscapedPath()
	if !strings.Contains(strings.ToUpper(escaped), "%2F") {
		return nil
	}
	// Route the path with each encoded slash standing for a byte no
	// literal segment holds, then read the parameters from the path sent.
	stand := strings.NewReplacer("%2F", "%00", "%2f", "%00").Replace(escaped)
	path, err := url.PathUnescape(stand)
	if err != nil {
		return nil
	}
	routed := r.Clone(r.Context())
	routed.URL.Path, routed.URL.RawPath = path, stand
	_, pattern, _, _ := s.route(routed)
	if pattern == "" {
		return nil
	}
	_, template, _ := strings.Cut(pattern, " ")
	want, got := strings.Split(template, "/"), strings.Split(escaped, "/")
	for i, seg := range want {
		name, ok := strings.CutPrefix(seg, "{")
		if !ok || strings.HasSuffix(name, "...}") || i >= len(got) {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		value, err := url.PathUnescape(got[i])
		if err != nil || !strings.Contains(value, "/") {
			continue
		}
		if name == "chat" {
			return CheckChat(value)
		}
		return BadRequest(name, "%s %q must not contain a slash", name, value)
	}
	return nil
}

// unrouted answers a request no pattern matched: the mux's 404 and 405
// become JSON errors (keeping Allow); anything else it says (a redirect to a
// cleaned path) is passed on as it is.
func (s *server) unrouted(w http.ResponseWriter, r *http.Request) {
	rec := capture(s.private, r)
	if rec.status == http.StatusNotFound {
		// The path may exist among the public routes, for another method.
		rec = capture(s.public, r)
	}
	switch rec.status {
	case http.StatusNotFound:
		WriteError(w, r, NotFound("no route for %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		WriteError(w, r, &fault.Error{Code: fault.MethodNotAllowed,
			Message: fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, rec.header.Get("Allow"))})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// Health answers GET /healthz: {"ok": true} when p answers within
// PingTimeout, else a 503 with Retry-After.
func Health(p Pinger) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if p != nil {
			ctx, cancel := context.WithTimeout(r.Context(), PingTimeout)
			defer cancel()
			if err := p.Ping(ctx); err != nil {
				return Unavailable(fmt.Errorf("health check: %w", err))
			}
		}
		WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	}
}

// statusWriter remembers the status and size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func capture(mux *http.ServeMux, r *http.Request) *captureWriter {
	h, _ := mux.Handler(r)
	rec := &captureWriter{header: make(http.Header)}
	h.ServeHTTP(rec, r)
	return rec
}

// captureWriter holds an answer in memory (the mux's short 404/405 texts).
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, b...)
	return len(b), nil
}
