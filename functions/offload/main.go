// Command offload is the after-tool and offload-input hooks as a Lambda
// function behind API Gateway: it stores a tool result's or user input's
// images and answers with refs, and hands out direct upload targets. Each
// image is recorded for the chat in the route, in the table the memory
// function deletes chats from, so it is deleted with the chat.
package main

import (
	"github.com/durachat/durachat/shared/app/chatsapi"
	"github.com/durachat/durachat/shared/app/httpfn"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
)

func main() {
	f := httpfn.Init(config.Offload)
	chatsapi.WithTable(&f)
	imgs, chats := f.Stores.Images(), chatsapi.New(f.Stores, f.Config.SettleAfter)
	f.StartHTTP(hooks.NewOffload(imgs, chats), hooks.NewUploads(imgs, f.Stores.Uploader, chats))
}
