// Command memory is the memory API as a Lambda function behind API Gateway:
// appending messages, the view, the memory tools, images, status and the
// tree, and the memory browser's pages (GET /ui/). It schedules builds on
// the queue the compact function consumes; it builds nothing itself, and
// links no model but the embedding model of search by meaning (Bedrock's,
// for its queries).
package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/durachat/durachat/shared/app/httpfn"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/model/bedrock"
	"github.com/durachat/durachat/shared/ui"
)

func main() {
	f := httpfn.Init(config.Memory)
	var models memoryapi.Models
	switch em := f.Config.EmbedModel; em.Provider {
	case "":
	case config.ProviderBedrock:
		models.Embedder = bedrock.NewEmbedder(bedrockruntime.NewFromConfig(f.AWS), em.ID)
	default:
		f.Fatal("embedding model", fmt.Errorf("%s: the memory function embeds through Bedrock, not %s", config.EnvEmbedModel, em.Provider))
	}
	m, err := memoryapi.NewLambda(f, models, nil)
	if err != nil {
		f.Fatal("memory", err)
	}
	// The memory browser's pages: public, they read the API with the
	// caller's token, and show images from the bucket's signed links.
	imageOrigins, err := ui.LinkOrigin(context.Background(), f.Stores.Linker)
	if err != nil {
		f.Fatal("memory browser", err)
	}
	f.Public = append(f.Public, ui.New(imageOrigins...))
	// POST /v1/mcp: no process outlives a request, so the MCP endpoint is
	// stateless and answers JSON.
	f.StartHTTP(append(m.Routes(), m.MCPRoutes(true))...)
}
