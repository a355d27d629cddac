// Command offload is the after-tool and offload-input hooks as a Lambda
// function behind API Gateway: it stores a tool result's or user input's
// images and answers with refs, and hands out direct upload targets.
package main

import (
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
)

func main() {
	f := lambdafn.Init(config.Offload)
	imgs := f.Stores.Images()
	f.StartHTTP(hooks.NewOffload(imgs), hooks.NewUploads(imgs, f.Stores.Uploader))
}
