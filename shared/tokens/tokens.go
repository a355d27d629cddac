// Package tokens authenticates bearer tokens that a Lambda function reads
// from a secret (Secrets Manager or an SSM SecureString, behind Reader):
// read at the cold start, cached, re-read when they are old or when a
// request brings a token the cache does not know (a token just added),
// at most every few seconds and with backoff after failures. A secret
// that cannot be read or does not parse keeps the last good tokens, is
// logged, and writes a metric an alarm watches; with no good tokens yet,
// a bearer request is answered 503, never a silent 401.
package tokens

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/emf"
	"github.com/durachat/durachat/shared/fault"
)

// Reader reads the text of the secret that holds the tokens.
type Reader interface {
	ReadTokens(ctx context.Context) (string, error)
}

// The metric a failed read writes, in Embedded Metric Format; a healthy
// function writes none.
const (
	MetricNamespace  = "durachat/auth"
	MetricReadErrors = "TokenReadErrors"
	// MetricDimension is the metric's one dimension: the function's name.
	MetricDimension = emf.Dimension
)

// Defaults of Options.
const (
	DefaultMaxAge       = 5 * time.Minute
	DefaultMissInterval = 10 * time.Second
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	DefaultReadTimeout  = 5 * time.Second
)

// Options configure a Source; zero values are the defaults.
type Options struct {
	// MaxAge: tokens read longer ago are re-read on the next request, so a
	// token removed from the secret stops working within about MaxAge.
	MaxAge time.Duration
	// MissInterval: a request with an unknown token re-reads the secret if
	// the last read began at least this long ago, so a token added to the
	// secret works within it, and a flood of wrong tokens costs at most
	// one read per interval.
	MissInterval time.Duration
	// MinBackoff, MaxBackoff bound the wait after failed reads, doubling
	// from the first to the second.
	MinBackoff, MaxBackoff time.Duration
	// ReadTimeout bounds one read.
	ReadTimeout time.Duration
	// Log receives a line per failed read and per change of the tokens.
	Log *slog.Logger
	// Metrics receives the Embedded Metric Format line of each failed
	// read, with Function as its dimension; nil writes none.
	Metrics  io.Writer
	Function string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Source is the tokens of one secret, as an api.Authenticator.
type Source struct {
	r Reader
	o Options

	mu       sync.Mutex
	auth     api.Authenticator // nil until a read succeeds
	count    int               // tokens in auth
	readAt   time.Time         // when the last read began
	goodAt   time.Time         // when the last good read began
	notUntil time.Time         // no read before this, after failures
	failures int
	lastErr  error
	reading  chan struct{} // closed when the read in flight ends
}

// New returns a Source reading r. Call Load once at the start.
func New(r Reader, o Options) *Source {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MissInterval <= 0 {
		o.MissInterval = DefaultMissInterval
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Source{r: r, o: o}
}

// Load reads the tokens: the read at a cold start. Its error is also
// logged and counted; requests retry the read with backoff.
func (s *Source) Load(ctx context.Context) error {
	return s.read(ctx, func(*Source, time.Time) bool { return true })
}

// Authenticate names the tenant of a request's bearer token.
func (s *Source) Authenticate(r *http.Request) (string, error) {
	if _, ok := api.BearerToken(r); !ok {
		return "", api.Unauthorized("an Authorization: Bearer <token> header is required")
	}
	ctx := r.Context()
	auth, stale := s.current()
	if auth == nil || stale {
		// None yet, or old: read now if the backoff allows.
		_ = s.read(ctx, (*Source).mayRetry)
		if auth, _ = s.current(); auth == nil {
			return "", s.unavailable()
		}
	}
	tenant, err := auth.Authenticate(r)
	if err == nil {
		return tenant, nil
	}
	// Unknown: perhaps just added to the secret.
	if s.read(ctx, (*Source).mayReadOnMiss) == nil {
		if auth, _ = s.current(); auth != nil {
			return auth.Authenticate(r)
		}
	}
	return "", err
}

// unavailable is the answer while no good tokens were ever read.
func (s *Source) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &fault.Error{Code: fault.Unavailable, Message: "the bearer tokens cannot be read; retry later", Err: s.lastErr}
}

func (s *Source) current() (api.Authenticator, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth, s.auth != nil && s.o.Now().Sub(s.goodAt) >= s.o.MaxAge
}

// mayRetry allows a read once the backoff after failures has passed.
func (s *Source) mayRetry(now time.Time) bool { return !now.Before(s.notUntil) }

// mayReadOnMiss also waits MissInterval after the last read.
func (s *Source) mayReadOnMiss(now time.Time) bool {
	return s.mayRetry(now) && now.Sub(s.readAt) >= s.o.MissInterval
}

// errNotNow is read's answer when allow refuses a read.
var errNotNow = fmt.Errorf("tokens: not read again yet")

// read reads the secret if allow (called under the lock) says so, or waits
// for the read already in flight. Only one read runs at a time.
func (s *Source) read(ctx context.Context, allow func(*Source, time.Time) bool) error {
	s.mu.Lock()
	if ch := s.reading; ch != nil {
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lastErr
	}
	now := s.o.Now()
	if !allow(s, now) {
		s.mu.Unlock()
		return errNotNow
	}
	done := make(chan struct{})
	s.reading, s.readAt = done, now
	s.mu.Unlock()

	// The read outlives the request that started it: others wait on it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ReadTimeout)
	text, err := s.r.ReadTokens(rctx)
	cancel()
	var parsed map[string]string
	if err == nil {
		parsed, err = config.ParseTokens(text)
		if err == nil && len(parsed) == 0 {
			err = fmt.Errorf("bearer tokens: the secret holds none")
		}
		if err != nil {
			err = &MalformedError{Err: err}
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.reading = nil
	defer close(done)
	if err != nil {
		s.failures++
		s.lastErr = err
		s.notUntil = now.Add(min(s.o.MinBackoff<<min(s.failures-1, 20), s.o.MaxBackoff))
		s.o.Log.Error("bearer tokens cannot be read", "err", err.Error(), "failures", s.failures,
			"keptTokens", s.count, "retryAfterMs", s.notUntil.Sub(now).Milliseconds())
		if s.o.Metrics != nil {
			_ = WriteReadErrorMetric(s.o.Metrics, now, s.o.Function)
		}
		return err
	}
	if s.failures > 0 || s.count != len(parsed) {
		s.o.Log.Info("bearer tokens read", "tokens", len(parsed), "afterFailures", s.failures)
	}
	s.auth, s.count, s.goodAt = api.BearerTokens(parsed), len(parsed), now
	s.failures, s.lastErr, s.notUntil = 0, nil, time.Time{}
	return nil
}

// MalformedError is a secret that was read but does not hold valid tokens.
type MalformedError struct{ Err error }

func (e *MalformedError) Error() string { return "the tokens secret is malformed: " + e.Err.Error() }
func (e *MalformedError) Unwrap() error { return e.Err }

// WriteReadErrorMetric writes the Embedded Metric Format line of one
// failed read by function (no dimension when empty) to w.
func WriteReadErrorMetric(w io.Writer, at time.Time, function string) error {
	return emf.Counts{Namespace: MetricNamespace, Function: function, Names: []string{MetricReadErrors}}.Write(w, at)
}
