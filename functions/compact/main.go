// Command compact runs the build queue's tasks: it builds memory nodes,
// and runs the next steps of chat deletions and retention sweeps. SQS
// invokes it with batches of messages; it answers with the messages to
// retry (partial batch failures), never with an error, so one failed task
// does not redeliver the batch.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lambdasqs"
)

func main() {
	f := lambdafn.Init(config.Compact)
	c, err := compactor.Open(context.Background(), f.Config)
	if err != nil {
		f.Fatal("compactor", err)
	}
	e, err := compactor.OpenEmbedder(context.Background(), f.Config)
	if err != nil {
		f.Fatal("embedding model", err)
	}
	m, err := memoryapi.NewLambda(f, memoryapi.Models{Compactor: c, Embedder: e}, os.Stdout)
	if err != nil {
		f.Fatal("memory", err)
	}
	lambda.Start(lambdasqs.Handler(m.Tasks))
}
