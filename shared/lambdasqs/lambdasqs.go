// Package lambdasqs serves a batch handler as a Lambda function that an SQS
// event source mapping invokes, with partial batch failures: the handler
// names the messages to leave on the queue and Lambda deletes the others.
package lambdasqs

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/store"
)

// Batcher handles one batch of received messages and returns the IDs of
// those to deliver again. tasks.Consumer is one.
type Batcher interface {
	HandleBatch(ctx context.Context, ds []store.Delivery) (retry []string)
}

// Handler is the Lambda handler of b: pass it to lambda.Start. It never
// fails the whole batch (the error is always nil), so one failed message
// does not bring back the others.
func Handler(b Batcher) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ds := make([]store.Delivery, len(ev.Records))
		for k, rec := range ev.Records {
			ds[k] = sqsqueue.Delivery(rec)
		}
		var resp events.SQSEventResponse
		for _, id := range b.HandleBatch(ctx, ds) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	}
}
