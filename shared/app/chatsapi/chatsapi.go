// Package chatsapi wires the chat lifecycle over one program's stores,
// one way for every program that records images for chats or deletes
// them: the offload function's hooks, and through memoryapi the memory and
// compact functions and the local server. (Apart from memoryapi so that
// the offload function links neither the memory nor the queue.)
package chatsapi

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/lifecycle"
)

// New is the chat lifecycle over stores: their table, blobs, linker,
// queue and scrubber (a program without a queue runs each deletion to
// its end in the call), settling after settle (0: lifecycle.SettleAfter).
func New(stores app.Stores, settle time.Duration) *lifecycle.Chats {
	return lifecycle.New(lifecycle.Config{Table: stores.Table, Blobs: stores.Blobs, Images: stores.Images(), Linker: stores.Linker, Queue: stores.Queue, Scrubber: stores.Scrubber, SettleAfter: settle})
}

// WithTable gives a Lambda function's stores the DynamoDB table of its
// configuration.
func WithTable(f *lambdafn.Function) {
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
}
