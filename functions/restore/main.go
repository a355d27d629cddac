// Command restore is the before-request hook as a Lambda function behind
// API Gateway: it swaps exact image refs in a provider request back for the
// images. It reads images only.
package main

import (
	"github.com/durachat/durachat/shared/app/httpfn"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
)

func main() {
	f := httpfn.Init(config.Restore)
	rs := hooks.NewRestore(f.Stores.Images(), f.Stores.Linker)
	rs.Bounded = true // within Lambda's response limit
	f.StartHTTP(rs)
}
