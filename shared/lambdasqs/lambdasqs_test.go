package lambdasqs_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/lambdasqs"
	"github.com/durachat/durachat/shared/store"
)

type batcher struct {
	got  []store.Delivery
	fail []string
}

func (b *batcher) HandleBatch(_ context.Context, ds []store.Delivery) []string {
	b.got = ds
	return b.fail
}

func TestHandlerReportsTheMessagesToDeliverAgain(t *testing.T) {
	b := &batcher{fail: []string{"m-2"}}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", ReceiptHandle: "r1", Body: `{"chat":"a"}`, Attributes: map[string]string{"ApproximateReceiveCount": "2"}},
		{MessageId: "m-2", ReceiptHandle: "r2", Body: `{"chat":"b"}`},
	}}
	resp, err := lambdasqs.Handler(b)(context.Background(), ev)
	if err != nil {
		t.Fatalf("the whole batch failed: %v", err)
	}
	want := []store.Delivery{
		{ID: "m-1", Receipt: "r1", Body: `{"chat":"a"}`, Receives: 2},
		{ID: "m-2", Receipt: "r2", Body: `{"chat":"b"}`, Receives: 1},
	}
	if !slices.Equal(b.got, want) {
		t.Errorf("deliveries %+v, want %+v", b.got, want)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-2" {
		t.Errorf("failures %+v, want m-2", resp.BatchItemFailures)
	}
}
