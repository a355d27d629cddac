// Command offload is the after-tool and offload-input hooks as a Lambda
// function behind API Gateway: it stores a tool result's or user input's
// images and answers with refs, and hands out direct upload targets. Each
// image is recorded for the chat in the route, in the table the memory
// function deletes chats from, so it is deleted with the chat.
package main

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/durachat/durachat/shared/app/httpfn"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/lifecycle"
)

func main() {
	f := httpfn.Init(config.Offload)
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
	imgs := f.Stores.Images()
	chats := lifecycle.New(lifecycle.Config{Table: f.Stores.Table, Blobs: f.Stores.Blobs, Images: imgs})
	f.StartHTTP(hooks.NewOffload(imgs, chats), hooks.NewUploads(imgs, f.Stores.Uploader, chats))
}
