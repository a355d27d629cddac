package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

func TestBuildsEmitEmbeddedMetricFormatLines(t *testing.T) {
	f := newFixture(t)
	var out bytes.Buffer
	f.m.metrics = &emf{w: &out, now: f.clock.Now}
	f.append(t, "user", long(0))
	f.deliverAll(t)
	var rec map[string]any
	if err := json.Unmarshal(bytes.Split(out.Bytes(), []byte("\n"))[0], &rec); err != nil {
		t.Fatalf("not one JSON line: %q", out.String())
	}
	aws, _ := rec["_aws"].(map[string]any)
	cwm, _ := aws["CloudWatchMetrics"].([]any)
	if len(cwm) != 1 || rec["Outcome"] != "built" || rec["Builds"] != 1.0 || aws["Timestamp"] == nil {
		t.Errorf("record %v", rec)
	}
}
