// Command memory is the memory API as a Lambda function behind API Gateway:
// appending messages, the view, the memory tools, images and status. It
// schedules builds on the queue the compact function consumes; it builds
// nothing itself, and links no model.
package main

import (
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	f := lambdafn.Init(config.Memory)
	m, err := memoryapi.NewLambda(f, nil, nil)
	if err != nil {
		f.Fatal("memory", err)
	}
	f.StartHTTP(m.Routes()...)
}
