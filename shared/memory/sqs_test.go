package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/model"
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

func sqsEvent(msgs []sent) events.SQSEvent {
	var ev events.SQSEvent
	for k, s := range msgs {
		body, _ := json.Marshal(s.msg)
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: string(rune('a' + k)), ReceiptHandle: "r" + string(rune('a'+k)), Body: string(body)})
	}
	return ev
}

func TestHandleSQSReportsFailedBuildsAndDelaysThemTenSeconds(t *testing.T) {
	f := newFixture(t)
	retrier := &fakeRetrier{}
	f.m.retrier = retrier
	f.comp.script = func(c Compression) (Compressed, error) {
		if c.Index == 1 {
			return Compressed{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
		}
		return Compressed{Line: "ok", Attempts: 1}, nil
	}
	f.append(t, "user", long(0), long(1))
	ev := sqsEvent(f.queue.take())
	ev.Records = append(ev.Records, events.SQSMessage{MessageId: "junk", ReceiptHandle: "rj", Body: "not json"})
	resp, err := f.m.HandleSQS(context.Background(), ev)
	if err != nil {
		t.Fatalf("the whole batch failed: %v", err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "b" {
		t.Fatalf("failures %+v, want only the failed build", resp.BatchItemFailures)
	}
	if len(retrier.calls) != 1 || retrier.calls[0] != (retried{"rb", DefaultRetry}) {
		t.Errorf("visibility changes %+v", retrier.calls)
	}
}

func TestHandleSQSWithoutARetrierSendsADelayedCopy(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c Compression) (Compressed, error) {
		return Compressed{}, &model.Error{Retryable: true, Err: errors.New("throttled")}
	}
	f.append(t, "user", long(0))
	resp, err := f.m.HandleSQS(context.Background(), sqsEvent(f.queue.take()))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("resp %+v err %v: the original is acknowledged once its copy is queued", resp, err)
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
				f.comp.script = func(Compression) (Compressed, error) { return Compressed{Attempts: 1}, tt.err }
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
