// Command memory is the memory API as a Lambda function behind API Gateway:
// appending messages, the view, the memory tools, images and status. It
// schedules builds on the queue the compact function consumes; it builds
// nothing itself, and links no model.
package main

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := lambdafn.Init(config.Memory)
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
	q := sqsqueue.New(sqs.NewFromConfig(f.AWS), f.Config.QueueURL)
	f.Stores.Queue, f.Stores.Receiver = q, q
	m, err := memoryapi.New(f.Config, f.Stores, nil, f.Log, nil)
	if err != nil {
		f.Fatal("memory", err)
	}
	f.StartHTTP(m.Routes()...)
}
