// Command compact builds memory nodes. SQS invokes it with batches of build
// messages; it answers with the messages to retry (partial batch failures),
// never with an error, so one failed build does not redeliver the batch.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lambdasqs"
)

func main() {
	f := lambdafn.Init(config.Compact)
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
	q := sqsqueue.New(sqs.NewFromConfig(f.AWS), f.Config.QueueURL)
	f.Stores.Queue, f.Stores.Receiver = q, q
	c, err := compactor.Open(context.Background(), f.Config)
	if err != nil {
		f.Fatal("compressor", err)
	}
	m, err := memoryapi.New(f.Config, f.Stores, c, f.Log, os.Stdout)
	if err != nil {
		f.Fatal("memory", err)
	}
	lambda.Start(lambdasqs.Handler(m.Memory))
}
