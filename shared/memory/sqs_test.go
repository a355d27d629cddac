package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv/logkeys"
)

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

// deliveries are sent messages as a batch the platform received: IDs a,
// b, ..., receipts ra, rb, ....
func deliveries(msgs []sent) []store.Delivery {
	var ds []store.Delivery
	for k, s := range msgs {
		ds = append(ds, store.Delivery{ID: string(rune('a' + k)), Receipt: "r" + string(rune('a'+k)), Body: s.msg.Body(), Receives: 1})
	}
	return ds
}

func TestHandleBatchReportsFailedBuildsAndDelaysThemTenSeconds(t *testing.T) {
	f := newFixture(t)
	retrier := &fakeRetrier{}
	f.retrier = retrier
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if c.Index == 1 {
			return Compacted{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
		}
		return Compacted{Line: "ok", Attempts: 1}, nil
	}
	f.append(t, "user", long(0), long(1))
	ds := append(deliveries(f.queue.take()), store.Delivery{ID: "junk", Receipt: "rj", Body: "not json"})
	if failed := f.consumer().HandleBatch(context.Background(), ds); len(failed) != 1 || failed[0] != "b" {
		t.Fatalf("failures %q, want only the failed build", failed)
	}
	if len(retrier.calls) != 1 || retrier.calls[0] != (retried{"rb", DefaultRetry}) {
		t.Errorf("visibility changes %+v", retrier.calls)
	}
}

// onceReceiver hands out its deliveries in one receive, then waits for
// ctx; it records what each delivery was settled with.
type onceReceiver struct {
	fakeRetrier
	ds    []store.Delivery
	acked []string
	done  chan struct{} // closed when every delivery is settled
}

func (r *onceReceiver) Receive(ctx context.Context, max int, _, _ time.Duration) ([]store.Delivery, error) {
	r.mu.Lock()
	n := min(max, len(r.ds))
	got := r.ds[:n]
	r.ds = r.ds[n:]
	r.mu.Unlock()
	if n == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return got, nil
}

func (r *onceReceiver) Ack(_ context.Context, receipt string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked = append(r.acked, receipt)
	r.settled()
	return nil
}

func (r *onceReceiver) Retry(ctx context.Context, receipt string, delay time.Duration) error {
	_ = r.fakeRetrier.Retry(ctx, receipt, delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled()
	return nil
}

// settled closes done once three deliveries are settled; r.mu is held.
func (r *onceReceiver) settled() {
	if len(r.acked)+len(r.calls) == 3 {
		close(r.done)
	}
}

func TestWorkerAcknowledgesBuiltMessagesAndDelaysFailedOnes(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if c.Index == 1 {
			return Compacted{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
		}
		return Compacted{Line: "ok", Attempts: 1}, nil
	}
	f.append(t, "user", long(0), long(1))
	recv := &onceReceiver{done: make(chan struct{})}
	recv.ds = append(deliveries(f.queue.take()), store.Delivery{ID: "junk", Receipt: "rj", Body: "not json"})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- f.consumer().Worker(ctx, recv) }()
	select {
	case <-recv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not settle every message")
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	slices.Sort(recv.acked)
	if !slices.Equal(recv.acked, []string{"ra", "rj"}) {
		t.Errorf("acknowledged %q, want the built and the malformed message", recv.acked)
	}
	if len(recv.calls) != 1 || recv.calls[0] != (retried{"rb", DefaultRetry}) {
		t.Errorf("visibility changes %+v", recv.calls)
	}
}

func TestHandleBatchWithoutARetrierSendsADelayedCopy(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		return Compacted{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
	}
	f.append(t, "user", long(0))
	if failed := f.consumer().HandleBatch(context.Background(), deliveries(f.queue.take())); len(failed) != 0 {
		t.Fatalf("failures %q: the original is acknowledged once its copy is queued", failed)
	}
	if again := f.queue.take(); len(again) != 1 || again[0].delay != DefaultRetry || again[0].msg.I != 0 {
		t.Errorf("requeued %+v", again)
	}
}

func TestOnlyFailedBuildsEmitMetricsAndADenialIsCountedApart(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		metrics []string
		denied  bool
	}{
		{"built", nil, nil, false},
		{"outage", &model.Error{Retryable: true, Err: errors.New("throttled")}, []string{MetricFailedBuilds}, false},
		{"refused", model.RefusedError(model.ErrRefused), []string{MetricFailedBuilds}, false},
		{"access denied", model.StatusError(403, errors.New("AccessDeniedException: aws-marketplace:Subscribe")), []string{MetricFailedBuilds, MetricDeniedBuilds}, true},
		{"bad key", model.StatusError(401, errors.New("invalid x-api-key")), []string{MetricFailedBuilds, MetricDeniedBuilds}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			var out bytes.Buffer
			f.m.metrics = &emf{w: &out, now: f.clock.Now, function: "compact-fn"}
			if tt.err != nil {
				f.comp.script = func(CompactRequest) (Compacted, error) { return Compacted{Attempts: 1}, tt.err }
			}
			f.append(t, "user", long(0))
			f.deliverAll(t)
			if tt.metrics == nil {
				if out.Len() != 0 {
					t.Fatalf("a healthy build wrote metrics: %q", out.String())
				}
				return
			}
			var rec map[string]any
			if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rec); err != nil {
				t.Fatalf("not one JSON line: %q", out.String())
			}
			aws, _ := rec["_aws"].(map[string]any)
			cwm, _ := aws["CloudWatchMetrics"].([]any)
			if len(cwm) != 1 || aws["Timestamp"] == nil || rec["FunctionName"] != "compact-fn" {
				t.Fatalf("record %v", rec)
			}
			dir, _ := cwm[0].(map[string]any)
			var names []string
			for _, m := range dir["Metrics"].([]any) {
				names = append(names, m.(map[string]any)["Name"].(string))
			}
			if !slices.Equal(names, tt.metrics) || dir["Namespace"] != MetricNamespace {
				t.Errorf("metrics %v in %v, want %v", names, dir["Namespace"], tt.metrics)
			}
			if got := strings.HasPrefix(f.state(t).LastError, "denied"); got != tt.denied {
				t.Errorf("status lastError %q: denial shown %v, want %v", f.state(t).LastError, got, tt.denied)
			}
		})
	}
}

// TestABuildsRecordsNameEachKeyOnce: the records a build logs, built or
// failed, hold each key once, and name the node's level apart from the
// record's.
func TestABuildsRecordsNameEachKeyOnce(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(fmt.Sprintf("failing=%v", failing), func(t *testing.T) {
			f := newFixture(t)
			var out bytes.Buffer
			f.m.logger = slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if failing {
				f.comp.script = func(CompactRequest) (Compacted, error) {
					return Compacted{Attempts: 1}, &model.Error{Retryable: true, Err: errors.New("throttled")}
				}
			}
			f.append(t, "user", long(0))
			f.deliverAll(t)
			builds := 0
			for _, rec := range logkeys.Check(t, out.Bytes()) {
				if rec["msg"] != "memory build" {
					continue
				}
				builds++
				if rec["nodeLevel"] != float64(0) || rec["nodeIndex"] != float64(0) || rec["node"] == nil {
					t.Errorf("the record does not name its node: %v", rec)
				}
				if want := map[bool]string{false: "INFO", true: "DEBUG"}[failing]; rec["level"] != want {
					t.Errorf("level %v, want %s", rec["level"], want)
				}
			}
			if builds == 0 {
				t.Fatalf("no build record in %s", out.String())
			}
		})
	}
}
