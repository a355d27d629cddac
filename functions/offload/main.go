// Command offload is the after-tool and offload-input hooks as a Lambda
// function behind API Gateway: it stores a tool result's or user input's
// images and answers with refs.
package main

import (
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := app.InitFunction(config.Offload)
	// WIRE: register the after-tool and offload-input hooks (shared/hooks)
	// over images.New(f.Stores.Blobs) and f.Stores.Table, e.g.
	//   f.StartHTTP(hooks.NewOffload(images.New(f.Stores.Blobs), f.Stores.Table))
	// Until then the function serves GET /healthz only.
	f.StartHTTP()
}
