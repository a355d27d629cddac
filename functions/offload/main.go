// Command offload is the after-tool and offload-input hooks as a Lambda
// function behind API Gateway: it stores a tool result's or user input's
// images and answers with refs.
package main

import (
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
)

func main() {
	f := lambdafn.Init(config.Offload)
	f.StartHTTP(hooks.NewOffload(images.New(f.Stores.Blobs)))
}
