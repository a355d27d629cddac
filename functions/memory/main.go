// Command memory is the memory API as a Lambda function behind API Gateway:
// appending messages, the view, the memory tools, images and status. It
// schedules builds on the queue the compact function consumes; it builds
// nothing itself.
package main

import (
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := app.InitFunction(config.Memory)
	m, err := app.NewMemory(f.Config, f.Stores, nil, f.Log, nil)
	if err != nil {
		f.Fatal("memory", err)
	}
	f.StartHTTP(m.Routes()...)
}
