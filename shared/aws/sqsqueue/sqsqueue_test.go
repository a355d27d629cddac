package sqsqueue_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storetest"
)

func newQueue(t testing.TB) (*sqsqueue.Queue, *awstest.SQS) {
	srv := awstest.StartSQS(t)
	return sqsqueue.New(srv.Client, srv.CreateQueue(t)), srv
}

func TestQueueConformance(t *testing.T) {
	storetest.TestQueue(t, func(t *testing.T) (store.Queue, store.Receiver) {
		q, _ := newQueue(t)
		return q, q
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// spy records the JSON bodies of requests for one SQS operation.
type spy struct {
	mu     sync.Mutex
	bodies []string
}

func (s *spy) watch(srv *awstest.SQS, op string) {
	match := awstest.Operation(op)
	srv.Faults.Add(func(r *http.Request) bool {
		if match(r) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			s.mu.Lock()
			s.bodies = append(s.bodies, string(body))
			s.mu.Unlock()
		}
		return false
	}, -1, awstest.Answer{})
}

func (s *spy) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return ""
	}
	return s.bodies[len(s.bodies)-1]
}

func TestDelayIsRoundedUpToWholeSeconds(t *testing.T) {
	q, srv := newQueue(t)
	var sent spy
	sent.watch(srv, "SendMessage")
	must(t, q.Send(t.Context(), "x", 1500*time.Millisecond))
	if body := sent.last(); !strings.Contains(body, `"DelaySeconds":2`) {
		t.Fatalf("SendMessage body %s, want DelaySeconds 2 for 1.5 s", body)
	}
	must(t, q.Send(t.Context(), "x", 0))
	if body := sent.last(); strings.Contains(body, `"DelaySeconds":1`) {
		t.Fatalf("SendMessage body %s, want no delay for 0", body)
	}
}

func TestReceiveAsksForTheReceiveCountBothWays(t *testing.T) {
	q, srv := newQueue(t)
	var received spy
	received.watch(srv, "ReceiveMessage")
	_, err := q.Receive(t.Context(), 10, time.Second, 0)
	must(t, err)
	body := received.last()
	for _, want := range []string{`"MessageSystemAttributeNames":["ApproximateReceiveCount"]`, `"AttributeNames":["ApproximateReceiveCount"]`, `"MaxNumberOfMessages":10`, `"VisibilityTimeout":1`} {
		if !strings.Contains(body, want) {
			t.Errorf("ReceiveMessage body %s lacks %s", body, want)
		}
	}
}

func TestArgumentsOutsideSQSLimitsAreRefused(t *testing.T) {
	q, _ := newQueue(t)
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
	}{
		{"SendNegativeDelay", func() error { return q.Send(ctx, "x", -time.Second) }},
		{"SendDelayOver15Minutes", func() error { return q.Send(ctx, "x", sqsqueue.MaxDelay+time.Second) }},
		{"ReceiveMaxZero", func() error { _, err := q.Receive(ctx, 0, time.Second, 0); return err }},
		{"ReceiveMaxOver10", func() error { _, err := q.Receive(ctx, 11, time.Second, 0); return err }},
		{"ReceiveNegativeVisibility", func() error { _, err := q.Receive(ctx, 1, -time.Second, 0); return err }},
		{"ReceiveWaitOver20Seconds", func() error { _, err := q.Receive(ctx, 1, time.Second, 21*time.Second); return err }},
		{"RetryDelayOver12Hours", func() error { return q.Retry(ctx, "r", sqsqueue.MaxVisibility+time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	err := q.Send(ctx, strings.Repeat("x", sqsqueue.MaxMessageSize+1), 0)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Send over MaxMessageSize = %v, want ErrTooLarge", err)
	}
}

func TestOutagesAreUnavailable(t *testing.T) {
	tests := []struct {
		op     string
		answer awstest.Answer
		call   func(*sqsqueue.Queue) error
	}{
		{"SendMessage", awstest.SQSError(400, "ThrottlingException", "Rate exceeded"),
			func(q *sqsqueue.Queue) error { return q.Send(t.Context(), "x", 0) }},
		{"ReceiveMessage", awstest.SQSError(500, "InternalError", "boom"),
			func(q *sqsqueue.Queue) error { _, err := q.Receive(t.Context(), 1, time.Second, 0); return err }},
		{"DeleteMessage", awstest.SQSError(503, "ServiceUnavailable", "down"),
			func(q *sqsqueue.Queue) error { return q.Ack(t.Context(), "r") }},
		{"ChangeMessageVisibility", awstest.SQSError(400, "RequestThrottled", "slow down"),
			func(q *sqsqueue.Queue) error { return q.Retry(t.Context(), "r", 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			q, srv := newQueue(t)
			srv.Faults.Add(awstest.Operation(tt.op), -1, tt.answer)
			if err := tt.call(q); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("= %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestMissingQueueIsNotAnOutage(t *testing.T) {
	srv := awstest.StartSQS(t)
	q := sqsqueue.New(srv.Client, srv.URL+"/123456789012/no-such-queue")
	err := q.Send(t.Context(), "x", 0)
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Send to a missing queue = %v, want a plain error", err)
	}
}

func TestLambdaMessageBecomesDelivery(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]string
		want  int
	}{
		{"FirstReceive", map[string]string{"ApproximateReceiveCount": "1"}, 1},
		{"ThirdReceive", map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1"}, 3},
		{"NoCountIsFirst", nil, 1},
		{"GarbledCountIsFirst", map[string]string{"ApproximateReceiveCount": "x"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sqsqueue.Delivery(events.SQSMessage{MessageId: "m-1", ReceiptHandle: "rh", Body: `{"chat":"c"}`, Attributes: tt.attrs})
			if d != (store.Delivery{ID: "m-1", Body: `{"chat":"c"}`, Receipt: "rh", Receives: tt.want}) {
				t.Fatalf("Delivery = %+v, want receives %d", d, tt.want)
			}
		})
	}
}

// A message received over the wire and one handed over by Lambda give the
// same Delivery fields.
func TestReceivedCountMatchesLambdaAttributes(t *testing.T) {
	q, _ := newQueue(t)
	ctx := t.Context()
	must(t, q.Send(ctx, "again", 0))
	var got []store.Delivery
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		ds, err := q.Receive(ctx, 1, time.Second, 2*time.Second)
		must(t, err)
		got = append(got, ds...)
	}
	if len(got) < 2 || got[0].Receives != 1 || got[1].Receives != 2 || got[0].ID != got[1].ID {
		t.Fatalf("two receives of one unacked message: %+v, want receive counts 1 then 2", got)
	}
	must(t, q.Ack(ctx, got[1].Receipt))
}
