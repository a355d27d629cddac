package tokens

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durachat/durachat/shared/api"
)

// secret is a Reader whose text and error the test sets, counting reads.
type secret struct {
	mu    sync.Mutex
	text  string
	err   error
	reads atomic.Int32
	gate  chan struct{} // when set, a read waits for it
}

func (s *secret) ReadTokens(ctx context.Context) (string, error) {
	s.reads.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text, s.err
}

func (s *secret) set(text string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.text, s.err = text, err
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

const (
	tokenA = "token-a-0123456789"
	tokenB = "token-b-0123456789"
)

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/chats", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// status is the HTTP status err is answered with, 0 for nil.
func status(err error) int {
	if err == nil {
		return 0
	}
	rec := httptest.NewRecorder()
	api.WriteError(rec, request(""), err)
	return rec.Code
}

func newSource(sec *secret, c *clock, metrics *bytes.Buffer) *Source {
	return New(sec, Options{Now: c.Now, Metrics: metrics, Function: "fn"})
}

func TestTokensAreReadAtStartAndServedFromTheCache(t *testing.T) {
	sec, c := &secret{text: tokenA + "=tenant-a"}, &clock{now: time.Unix(1000, 0)}
	s := newSource(sec, c, nil)
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if tenant, err := s.Authenticate(request(tokenA)); err != nil || tenant != "tenant-a" {
			t.Fatalf("tenant %q, %v", tenant, err)
		}
		c.advance(time.Second)
	}
	if n := sec.reads.Load(); n != 1 {
		t.Errorf("%d reads, want the one at start", n)
	}
	if _, err := s.Authenticate(request("")); status(err) != http.StatusUnauthorized {
		t.Errorf("no token: %v", err)
	}
}

// A token added to the secret works on the first request that brings it,
// once MissInterval has passed since the last read; a flood of wrong
// tokens reads the secret at most once per interval.
func TestAnUnknownTokenReReadsTheSecretAtMostEveryMissInterval(t *testing.T) {
	sec, c := &secret{text: tokenA + "=tenant-a"}, &clock{now: time.Unix(1000, 0)}
	s := newSource(sec, c, nil)
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	sec.set(tokenA+"=tenant-a,"+tokenB+"=tenant-b", nil)
	if _, err := s.Authenticate(request(tokenB)); status(err) != http.StatusUnauthorized {
		t.Fatalf("within MissInterval of the last read: %v, want 401 without a read", err)
	}
	if n := sec.reads.Load(); n != 1 {
		t.Fatalf("%d reads", n)
	}
	c.advance(DefaultMissInterval)
	if tenant, err := s.Authenticate(request(tokenB)); err != nil || tenant != "tenant-b" {
		t.Fatalf("the added token: %q, %v", tenant, err)
	}
	for range 100 {
		if _, err := s.Authenticate(request("wrong-token-0123456789")); status(err) != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %v", err)
		}
	}
	c.advance(DefaultMissInterval)
	for range 100 {
		s.Authenticate(request("wrong-token-0123456789"))
	}
	if n := sec.reads.Load(); n != 3 {
		t.Errorf("%d reads for two intervals of wrong tokens, want 3 (start, one per interval)", n)
	}
}

// A token removed from the secret stops working once the cache is MaxAge
// old.
func TestTokensOlderThanMaxAgeAreReadAgain(t *testing.T) {
	sec, c := &secret{text: tokenA + "=tenant-a," + tokenB + "=tenant-b"}, &clock{now: time.Unix(1000, 0)}
	s := newSource(sec, c, nil)
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	sec.set(tokenA+"=tenant-a", nil)
	c.advance(DefaultMaxAge - time.Second)
	if _, err := s.Authenticate(request(tokenB)); err != nil {
		t.Fatalf("before MaxAge: %v", err)
	}
	c.advance(time.Second)
	if _, err := s.Authenticate(request(tokenB)); status(err) != http.StatusUnauthorized {
		t.Fatalf("the removed token after MaxAge: %v, want 401", err)
	}
}

// A malformed secret (or one that cannot be read) is logged and counted,
// keeps the last good tokens, and is retried with a doubling backoff.
func TestAMalformedSecretKeepsTheLastTokensAndIsCounted(t *testing.T) {
	var metrics bytes.Buffer
	sec, c := &secret{text: tokenA + "=tenant-a"}, &clock{now: time.Unix(1000, 0)}
	s := newSource(sec, c, &metrics)
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	sec.set("short=tenant-a", nil)
	c.advance(DefaultMaxAge)
	if tenant, err := s.Authenticate(request(tokenA)); err != nil || tenant != "tenant-a" {
		t.Fatalf("with the secret malformed: %q, %v; want the last good tokens", tenant, err)
	}
	if got := strings.Count(metrics.String(), `"`+MetricReadErrors+`":1`); got != 1 {
		t.Fatalf("metrics %q, want one read error", metrics.String())
	}
	if strings.Contains(metrics.String(), "short") {
		t.Error("the metric line shows the secret")
	}
	// Retried after 1 s, 2 s, 4 s: each request in between reads nothing.
	reads := sec.reads.Load()
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		c.advance(wait - time.Millisecond)
		s.Authenticate(request(tokenA))
		if sec.reads.Load() != reads {
			t.Fatalf("read again before the backoff of %v", wait)
		}
		c.advance(time.Millisecond)
		s.Authenticate(request(tokenA))
		if sec.reads.Load() != reads+1 {
			t.Fatalf("not read again after the backoff of %v", wait)
		}
		reads++
	}
	sec.set(tokenB+"=tenant-b", nil)
	c.advance(8 * time.Second)
	if tenant, err := s.Authenticate(request(tokenB)); err != nil || tenant != "tenant-b" {
		t.Fatalf("after the fix: %q, %v", tenant, err)
	}
}

// With no good tokens yet, a bearer request is an outage (503 with
// Retry-After), not a wrong token; fixing the secret heals it without a
// deploy.
func TestNoGoodTokensYetIsA503UntilTheSecretIsFixed(t *testing.T) {
	var metrics bytes.Buffer
	sec, c := &secret{err: errors.New("AccessDeniedException")}, &clock{now: time.Unix(1000, 0)}
	s := newSource(sec, c, &metrics)
	err := s.Load(context.Background())
	if err == nil {
		t.Fatal("the failed read at start returned no error")
	}
	_, err = s.Authenticate(request(tokenA))
	rec := httptest.NewRecorder()
	if api.WriteError(rec, request(""), err); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%v, want a 503 with Retry-After", err)
	}
	sec.set("", nil)
	c.advance(time.Minute)
	var malformed *MalformedError
	if _, err := s.Authenticate(request(tokenA)); status(err) != http.StatusServiceUnavailable || !errors.As(err, &malformed) {
		t.Fatalf("an empty secret: %v, want a 503 for a malformed secret", err)
	}
	sec.set(tokenA+"=tenant-a", nil)
	c.advance(time.Minute)
	if tenant, err := s.Authenticate(request(tokenA)); err != nil || tenant != "tenant-a" {
		t.Fatalf("after the fix: %q, %v", tenant, err)
	}
	if got := strings.Count(metrics.String(), "\n"); got != 2 {
		t.Errorf("%d metric lines, want one per failed read (2)", got)
	}
}

// Concurrent requests that all need a read share one. synctest.Wait
// holds the read until every request waits, however slowly they start.
func TestConcurrentRequestsShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sec := &secret{text: tokenA + "=tenant-a", gate: make(chan struct{})}
		s := New(sec, Options{})
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				_, err := s.Authenticate(request(tokenA))
				errs <- err
			})
		}
		synctest.Wait()
		if n := sec.reads.Load(); n != 1 {
			t.Errorf("%d reads started by 20 waiting requests, want 1", n)
		}
		close(sec.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if n := sec.reads.Load(); n != 1 {
			t.Errorf("%d reads, want 1", n)
		}
	})
}

func TestTheReadErrorMetricIsOneEMFLineWithTheFunctionsName(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReadErrorMetric(&b, time.UnixMilli(1234), "durachat-RestoreFunction-x"); err != nil {
		t.Fatal(err)
	}
	want := `{"FunctionName":"durachat-RestoreFunction-x","TokenReadErrors":1,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["FunctionName"]],"Metrics":[{"Name":"TokenReadErrors","Unit":"Count"}],"Namespace":"durachat/auth"}],"Timestamp":1234}}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
}
