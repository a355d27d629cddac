package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/client"
)

// flaky answers 503 with Retry-After to the first `fail` requests, then 200
// with body. It counts the requests and keeps the last Authorization header
// and body.
type flaky struct {
	fail       int32
	retryAfter string
	body       string
	calls      atomic.Int32
	auth       atomic.Value
	lastBody   atomic.Value
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	f.auth.Store(r.Header.Get("Authorization"))
	b, _ := io.ReadAll(r.Body)
	f.lastBody.Store(string(b))
	if n <= f.fail {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"a backing service is unavailable; retry later"}}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, f.body)
}

func flakyClient(t *testing.T, f *flaky, opts ...client.Option) *client.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+"/stage/", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestA503IsRetriedAfterItsRetryAfter(t *testing.T) {
	f := &flaky{fail: 1, retryAfter: "1", body: `{"view":"<chat>\n</chat>"}`}
	c := flakyClient(t, f)
	start := time.Now()
	v, err := c.Chat("c").View(testCtx(t), client.NoWait)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, want at least the 1 s of Retry-After", waited)
	}
	if f.calls.Load() != 2 || v.View != "<chat>\n</chat>" {
		t.Fatalf("calls = %d, view %q; want 2 calls and the view", f.calls.Load(), v.View)
	}
}

func TestA503IsRetriedOnlyWhereARepeatIsSafe(t *testing.T) {
	msg := client.UserText("hi")
	tests := []struct {
		name      string
		call      func(ctx context.Context, ch *client.Chat) error
		wantCalls int32
	}{
		{"a read is retried", func(ctx context.Context, ch *client.Chat) error { _, err := ch.Status(ctx); return err }, 2},
		{"a hook is retried", func(ctx context.Context, ch *client.Chat) error {
			_, err := ch.BeforeRequest(ctx, client.BeforeRequestInput{Format: client.FormatPi, Request: client.PiContext{}})
			return err
		}, 2},
		{"a memory tool is retried", func(ctx context.Context, ch *client.Chat) error { _, err := ch.Date(ctx, 0); return err }, 2},
		{"a settings change is retried", func(ctx context.Context, ch *client.Chat) error {
			_, err := ch.SetMemorySettings(ctx, client.MemorySettings{Search: true})
			return err
		}, 2},
		{"an append with a receipt is retried", func(ctx context.Context, ch *client.Chat) error { _, err := ch.Append(ctx, "r", msg); return err }, 2},
		{"an append without a receipt is not retried", func(ctx context.Context, ch *client.Chat) error { _, err := ch.Append(ctx, "", msg); return err }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{fail: 1, retryAfter: "0", body: `{"content":[],"ids":[0]}`}
			err := tt.call(testCtx(t), flakyClient(t, f).Chat("c"))
			if got := f.calls.Load(); got != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", got, tt.wantCalls)
			}
			if tt.wantCalls == 1 && !client.IsUnavailable(err) {
				t.Fatalf("err = %v, want the 503", err)
			}
			if tt.wantCalls == 2 && err != nil {
				t.Fatalf("err = %v, want success after the retry", err)
			}
		})
	}
}

func TestRetriesAreBoundedAndEndWithTheTyped503(t *testing.T) {
	f := &flaky{fail: 100, retryAfter: "0"}
	err := flakyClient(t, f, client.WithRetry(3, time.Second)).Health(testCtx(t))
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Code != client.CodeUnavailable || e.RequestID != "req-1" {
		t.Fatalf("err = %#v, want the 503 as *client.Error", err)
	}
	if f.calls.Load() != 3 {
		t.Fatalf("calls = %d, want 3", f.calls.Load())
	}
}

func TestMaxWaitCapsALongRetryAfter(t *testing.T) {
	f := &flaky{fail: 1, retryAfter: "3600", body: `{"ok":true}`}
	start := time.Now()
	if err := flakyClient(t, f, client.WithRetry(2, 10*time.Millisecond)).Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("waited %v, want the 10 ms cap", time.Since(start))
	}
}

func TestADeadlineBeforeRetryAfterReturnsThe503AtOnce(t *testing.T) {
	// The deadline is far, so that only a wait for it (not a slow
	// machine) can fail the test; Retry-After, uncapped, is farther still.
	const deadline = time.Minute
	f := &flaky{fail: 1, retryAfter: "3600"}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := flakyClient(t, f, client.WithRetry(client.DefaultAttempts, time.Hour)).Health(ctx)
	if !client.IsUnavailable(err) || time.Since(start) > deadline/2 {
		t.Fatalf("err = %v after %v, want the 503 at once", err, time.Since(start))
	}
}

func TestCancellingWhileWaitingToRetryEndsTheCall(t *testing.T) {
	f := &flaky{fail: 1, retryAfter: "10"}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := flakyClient(t, f).Health(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestTheTokenIsSentAsABearerAndTheBodyIsResent(t *testing.T) {
	f := &flaky{fail: 1, retryAfter: "0", body: `{"ids":[4]}`}
	ids, err := flakyClient(t, f, client.WithToken("tok")).Chat("c").Append(testCtx(t), "r", client.UserText("x"))
	if err != nil || len(ids) != 1 || ids[0] != 4 {
		t.Fatalf("Append = %v, %v", ids, err)
	}
	if f.auth.Load() != "Bearer tok" {
		t.Fatalf("Authorization = %q, want Bearer tok", f.auth.Load())
	}
	var body struct {
		Receipt  string            `json:"receipt"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(f.lastBody.Load().(string)), &body); err != nil || body.Receipt != "r" || len(body.Messages) != 1 {
		t.Fatalf("retried body = %v (%v), want the whole append again", f.lastBody.Load(), err)
	}
}

func TestAnErrorThatIsNotDurachatsJSONGetsTheCodeOfItsStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"Unauthorized"}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat("c").Tools(testCtx(t))
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeUnauthorized || e.Message != `{"message":"Unauthorized"}` {
		t.Fatalf("err = %#v, want unauthorized with the body as message", err)
	}
}

// losesFirstAnswer passes every request to the server behind it, but of
// the first request to path it drops the connection once the server has
// answered, so the client never gets that answer.
type losesFirstAnswer struct {
	next  http.Handler
	path  string
	lost  atomic.Bool
	calls atomic.Int32
}

func (l *losesFirstAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != l.path || r.Method != http.MethodPost {
		l.next.ServeHTTP(w, r)
		return
	}
	l.calls.Add(1)
	if l.lost.Swap(true) {
		l.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		panic(fmt.Sprintf("the first append failed at the server: %d %s", rec.Code, rec.Body))
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func TestAnAppendWhoseAnswerIsLostIsSentAgainAndLoggedOnce(t *testing.T) {
	ctx := testCtx(t)
	chat := chatFor(t)
	target, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &losesFirstAnswer{next: httputil.NewSingleHostReverseProxy(target), path: "/v1/chats/" + chat.ID() + "/messages"}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	step := client.Message{Role: "user", Content: client.Content{client.Text("the same step")}, Timestamp: 1_700_000_000_000}
	ids, err := c.Chat(chat.ID()).Append(ctx, "turn-1", step)
	if err != nil {
		t.Fatalf("append through a lost answer: %v", err)
	}
	if got := proxy.calls.Load(); got != 2 {
		t.Fatalf("the append was sent %d times, want 2 (the lost one, then once more)", got)
	}
	// The host, not told, sends the same step again itself.
	again, err := chat.Append(ctx, "turn-1", step)
	if err != nil || !slices.Equal(again, ids) {
		t.Fatalf("the host's own retry = %v, %v; want the first ids %v", again, err, ids)
	}
	page, err := chat.Messages(ctx, client.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || !slices.Equal(ids, []int64{0}) {
		t.Fatalf("ids %v and %d messages logged, want [0] and one", ids, len(page.Messages))
	}
}

func TestACallThatIsNotSafeToRepeatIsNotSentAgainWhenItsAnswerIsLost(t *testing.T) {
	ctx := testCtx(t)
	chat := chatFor(t)
	target, _ := url.Parse(serverURL)
	proxy := &losesFirstAnswer{next: httputil.NewSingleHostReverseProxy(target), path: "/v1/chats/" + chat.ID() + "/messages"}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	c, _ := client.New(srv.URL)
	// Without a receipt an append cannot be told from a second one.
	if _, err := c.Chat(chat.ID()).Append(ctx, "", client.UserText("once")); err == nil {
		t.Fatal("an append without a receipt whose answer was lost returned no error")
	}
	if got := proxy.calls.Load(); got != 1 {
		t.Fatalf("sent %d times, want once", got)
	}
}
