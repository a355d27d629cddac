// Command compact builds memory nodes. SQS invokes it with batches of build
// messages; it answers with the messages to retry (partial batch failures),
// never with an error, so one failed build does not redeliver the batch.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := app.InitFunction(config.Compact)
	// WIRE: the model from f.Config.Model, f.Config.ModelURL and
	// f.Config.ModelKey (compactor.OpenModel), or the custom compressor
	// named by f.Config.CompressorURL / CompressorFunction; the memory over
	// f.Stores as in functions/memory, with Retrier: the SQS queue
	// (f.Stores.Receiver) and Metrics: os.Stdout; then
	//   lambda.Start(m.HandleSQS)
	// Until then every message is reported as failed, so none is lost: SQS
	// redelivers it, and after the redrive limit keeps it in the DLQ.
	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		f.Log.ErrorContext(ctx, "compaction is not wired; leaving the batch on the queue", "messages", len(ev.Records))
		return resp, nil
	})
}
