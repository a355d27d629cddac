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
	// WIRE: the transcript and memory routes over f.Stores, e.g.
	//   imgs := images.New(f.Stores.Blobs)
	//   log := transcript.New(f.Stores.Table, f.Stores.Blobs, imgs)
	//   m, err := memory.New(memory.Config{Table: f.Stores.Table, Log: log, Images: imgs,
	//       Queue: f.Stores.Queue, Compressor: <see functions/compact>, Search: f.Config.Search, Logger: f.Log})
	//   f.StartHTTP(transcript.NewRoutes(log, imgs, m), m)
	// Until then the function serves GET /healthz only.
	f.StartHTTP()
}
