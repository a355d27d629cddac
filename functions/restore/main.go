// Command restore is the before-request hook as a Lambda function behind
// API Gateway: it swaps exact image refs in a provider request back for the
// images. It reads images, and which images the chat in the route names
// (the chat's identity and its references, in the table): a ref to any
// other image stays text.
package main

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/durachat/durachat/shared/app/httpfn"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
)

func main() {
	f := httpfn.Init(config.Restore)
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
	rs := hooks.NewRestore(f.Stores.Images(), f.Stores.Linker)
	rs.Chats = chatid.New(f.Stores.Table)
	rs.Bounded = true // within Lambda's response limit
	f.StartHTTP(rs)
}
