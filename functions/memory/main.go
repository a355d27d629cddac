// Command memory is the memory API as a Lambda function behind API Gateway:
// appending messages, the view, the memory tools, images and status. It
// schedules builds on the queue the compact function consumes.
package main

import (
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := app.InitFunction(config.Memory)
	// WIRE: register the transcript routes (POST messages, GET images) and
	// the memory routes (view, tools, status) over f.Stores (Table, Blobs,
	// Linker, Queue) and f.Config.Search, e.g.
	//   t := transcript.New(f.Stores.Table, f.Stores.Blobs)
	//   f.StartHTTP(t, memory.NewRoutes(t, f.Stores.Table, f.Stores.Queue, f.Config.Search))
	// Until then the function serves GET /healthz only.
	f.StartHTTP()
}
