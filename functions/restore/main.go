// Command restore is the before-request hook as a Lambda function behind
// API Gateway: it swaps exact image refs in a provider request back for the
// images. It reads images only.
package main

import (
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := app.InitFunction(config.Restore)
	// WIRE: register the before-request hook (shared/hooks) over the tenant
	// image store and f.Stores.Linker, e.g.
	//   f.StartHTTP(hooks.NewRestore(images.New(f.Stores.Blobs), f.Stores.Linker))
	// Until then the function serves GET /healthz only.
	f.StartHTTP()
}
