package tasks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// Decode reads the envelope, and the two formats written before it that a
// deployed queue may still hold: a lifecycle task named by "op", and a
// build with no kind at all.
func TestDecodeReadsTheEnvelopeAndTheFormatsWrittenBeforeIt(t *testing.T) {
	tests := []struct {
		name, body string
		want       tasks.Message
	}{
		{"build", `{"kind":"build","tenant":"t","chat":"c","n":"0123456789abcdef","l":1,"i":4}`,
			tasks.Message{Kind: tasks.Build, Tenant: "t", Chat: "c", Inc: "0123456789abcdef", L: 1, I: 4}},
		{"delete", `{"kind":"delete","tenant":"t","chat":"c","n":"0123456789abcdef"}`,
			tasks.Message{Kind: tasks.Delete, Tenant: "t", Chat: "c", Inc: "0123456789abcdef"}},
		{"expire step", `{"kind":"expire","run":"r1","seq":3}`, tasks.Message{Kind: tasks.Expire, Run: "r1", Seq: 3}},
		{"a kind no handler knows", `{"kind":"erase","tenant":"t"}`, tasks.Message{Kind: "erase", Tenant: "t"}},
		{"build before the envelope", `{"tenant":"t","chat":"c","n":"0123456789abcdef","l":0,"i":7}`,
			tasks.Message{Kind: tasks.Build, Tenant: "t", Chat: "c", Inc: "0123456789abcdef", I: 7}},
		{"build before incarnations", `{"tenant":"t","chat":"c","l":2,"i":0}`, tasks.Message{Kind: tasks.Build, Tenant: "t", Chat: "c", L: 2}},
		{"delete before the envelope", `{"op":"delete","tenant":"t","chat":"c","n":"0123456789abcdef"}`,
			tasks.Message{Kind: tasks.Delete, Tenant: "t", Chat: "c", Inc: "0123456789abcdef"}},
		{"settle before the envelope", `{"op":"settle","tenant":"t","chat":"c"}`, tasks.Message{Kind: tasks.Settle, Tenant: "t", Chat: "c"}},
		{"hourly trigger before the envelope", `{"op":"expire"}`, tasks.Message{Kind: tasks.Expire}},
		{"the kind over the op", `{"kind":"settle","op":"delete","chat":"c"}`, tasks.Message{Kind: tasks.Settle, Chat: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tasks.Decode(tt.body)
			if err != nil || got != tt.want {
				t.Fatalf("Decode(%s) = %+v, %v, want %+v", tt.body, got, err, tt.want)
			}
		})
	}
	for _, body := range []string{"not json", `["kind","build"]`, `{"kind":3}`, ``} {
		if _, err := tasks.Decode(body); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", body, err)
		}
	}
}

// Only the envelope is written: every message names its kind, none an op,
// and reads back as it was written.
func TestOnlyTheEnvelopeIsWritten(t *testing.T) {
	c := chatid.Chat{Tenant: "t", ID: "c", Inc: "0123456789abcdef"}
	build := tasks.For(tasks.Build, c)
	build.L, build.I = 0, 0
	for _, m := range []tasks.Message{build, tasks.For(tasks.Delete, c), tasks.For(tasks.Settle, c), {Kind: tasks.Expire, Run: "r", Seq: 2}} {
		body := m.Body()
		if !strings.HasPrefix(body, `{"kind":"`+string(m.Kind)+`"`) || strings.Contains(body, `"op"`) {
			t.Errorf("%s is not the envelope", body)
		}
		if got, err := tasks.Decode(body); err != nil || got != m {
			t.Errorf("Decode(%s) = %+v, %v, want %+v", body, got, err, m)
		}
	}
}

// recorder is a handler that records the messages it ran.
type recorder struct {
	mu  sync.Mutex
	got []tasks.Message
	err error
}

func (r *recorder) run(_ context.Context, m tasks.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	return r.err
}

// Each message is run by the one handler of its kind, decoded once; a
// message of no kind with a handler is malformed.
func TestTheRouterRunsEachMessageByTheHandlerOfItsKind(t *testing.T) {
	handlers := map[tasks.Kind]*recorder{tasks.Build: {}, tasks.Delete: {}, tasks.Settle: {}, tasks.Expire: {}}
	table := map[tasks.Kind]tasks.Handler{}
	for k, r := range handlers {
		table[k] = r.run
	}
	r := tasks.NewRouter(table)
	if got := r.Kinds(); !slices.Equal(got, []tasks.Kind{tasks.Build, tasks.Delete, tasks.Expire, tasks.Settle}) {
		t.Fatalf("kinds %v", got)
	}
	bodies := map[tasks.Kind]string{
		tasks.Build: `{"chat":"c","l":0,"i":1}`, tasks.Delete: `{"kind":"delete","chat":"c"}`,
		tasks.Settle: `{"op":"settle","chat":"c"}`, tasks.Expire: `{"kind":"expire"}`,
	}
	for k, body := range bodies {
		if m, err := r.Route(t.Context(), body); err != nil || m.Kind != k {
			t.Fatalf("Route(%s) = %+v, %v", body, m, err)
		}
	}
	for k, h := range handlers {
		if len(h.got) != 1 || h.got[0].Kind != k {
			t.Errorf("the %s handler ran %+v, want its one message", k, h.got)
		}
	}
	if _, err := r.Route(t.Context(), `{"kind":"erase","chat":"c"}`); !errors.Is(err, tasks.ErrMalformed) {
		t.Errorf("a kind without a handler: %v, want ErrMalformed", err)
	}
}

func TestAKindHasOneHandler(t *testing.T) {
	r := tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: (&recorder{}).run})
	defer func() {
		if recover() == nil {
			t.Fatal("a second handler of a kind was registered")
		}
	}()
	r.Handle(tasks.Build, (&recorder{}).run)
}

type retried struct {
	receipt string
	delay   time.Duration
}

type fakeRetrier struct {
	mu    sync.Mutex
	calls []retried
}

func (r *fakeRetrier) Retry(_ context.Context, receipt string, delay time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, retried{receipt, delay})
	return nil
}

// delayed is a failure that names its delay.
type delayed struct{ after time.Duration }

func (d delayed) Error() string             { return fmt.Sprintf("retry in %s", d.after) }
func (d delayed) RetryDelay() time.Duration { return d.after }

// A batch leaves on the queue only the messages whose task failed, each
// made visible again after its error's delay (or the default); a
// malformed message is dropped; a failure its handler logged is not
// logged again.
func TestABatchKeepsOnlyFailedTasksAndDropsMalformedMessages(t *testing.T) {
	fail := map[string]error{
		"plain":  errors.New("outage"),
		"timed":  delayed{time.Minute},
		"logged": tasks.Logged(delayed{2 * time.Second}),
	}
	handler := func(_ context.Context, m tasks.Message) error {
		if m.Chat == "bad" {
			return fmt.Errorf("%w: names nothing", tasks.ErrMalformed)
		}
		return fail[m.Chat]
	}
	var logs bytes.Buffer
	retrier := &fakeRetrier{}
	c := tasks.NewConsumer(tasks.Config{
		Router:  tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: handler, tasks.Delete: handler}),
		Retrier: retrier, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	var ds []store.Delivery
	for _, body := range []string{`{"kind":"build","chat":"ok"}`, `{"kind":"delete","chat":"plain"}`, `{"chat":"timed"}`,
		`{"kind":"build","chat":"logged"}`, `{"kind":"build","chat":"bad"}`, `not json`, `{"kind":"erase"}`} {
		ds = append(ds, store.Delivery{ID: body, Receipt: "r" + body, Body: body})
	}
	failed := c.HandleBatch(t.Context(), ds)
	slices.Sort(failed)
	want := []string{`{"chat":"timed"}`, `{"kind":"build","chat":"logged"}`, `{"kind":"delete","chat":"plain"}`}
	if !slices.Equal(failed, want) {
		t.Fatalf("kept %q, want %q", failed, want)
	}
	delays := map[string]time.Duration{}
	for _, r := range retrier.calls {
		delays[strings.TrimPrefix(r.receipt, "r")] = r.delay
	}
	if delays[want[0]] != time.Minute || delays[want[1]] != 2*time.Second || delays[want[2]] != tasks.DefaultRetry || len(delays) != 3 {
		t.Errorf("delays %v", delays)
	}
	if n := strings.Count(logs.String(), "a queue task failed"); n != 2 {
		t.Errorf("%d failures logged, want the two their handlers did not log:\n%s", n, &logs)
	}
	if n := strings.Count(logs.String(), "dropping a malformed queue message"); n != 3 {
		t.Errorf("%d drops logged, want 3:\n%s", n, &logs)
	}
}

// Without a Retrier, a failed message of a batch comes back as a delayed
// copy (as it was written) and the original is acknowledged.
func TestWithoutARetrierAFailedMessageIsSentAgainDelayed(t *testing.T) {
	q := &sentQueue{}
	c := tasks.NewConsumer(tasks.Config{
		Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: func(context.Context, tasks.Message) error {
			return delayed{time.Minute}
		}}),
		Queue: q, Logger: slog.New(slog.DiscardHandler),
	})
	body := `{"tenant":"t","chat":"c","l":0,"i":0}`
	if failed := c.HandleBatch(t.Context(), []store.Delivery{{ID: "a", Receipt: "ra", Body: body}}); len(failed) != 0 {
		t.Fatalf("kept %q: the original is acknowledged once its copy is sent", failed)
	}
	if len(q.sent) != 1 || q.sent[0] != (retried{body, time.Minute}) {
		t.Errorf("sent %+v", q.sent)
	}
}

type sentQueue struct {
	mu   sync.Mutex
	sent []retried
}

func (q *sentQueue) Send(_ context.Context, body string, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, retried{body, delay})
	return nil
}

func (q *sentQueue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	for _, b := range bodies {
		_ = q.Send(ctx, b, delay)
	}
	return nil
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"kind":"build","tenant":"t","chat":"c","l":0,"i":5}`, `{"tenant":"t","chat":"c","l":0,"i":5}`,
		`{"op":"expire"}`, `{"op":"delete","chat":"c","n":"0123456789abcdef"}`, `{"kind":"expire","run":"r","seq":2}`, `not json`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := tasks.Decode(body)
		if err != nil {
			return
		}
		if m.Kind == "" {
			t.Fatalf("%q read with no kind", body)
		}
		// What is read is written as the envelope, which reads the same.
		if again, err := tasks.Decode(m.Body()); err != nil || again != m {
			t.Fatalf("%q read as %+v, written as %s, read back as %+v (%v)", body, m, m.Body(), again, err)
		}
	})
}
