package stack_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpThroughTheGateway is the MCP endpoint as a host meets it in AWS: the
// Go SDK's client through the gateway and its JWT authorizer to the memory
// function, stateless. It logs an image, waits for the view through the
// queue, zooms down to the image and compares its bytes; without a token
// the authorizer refuses the connection.
func mcpThroughTheGateway(t *testing.T, s *stack.Stack) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	connect := func(token string) (*sdk.ClientSession, error) {
		return mcptest.Connect(ctx, s.URL+mcp.Pattern, token)
	}
	cs, err := connect(s.DevToken)
	if err != nil {
		t.Fatalf("connecting with the dev token: %v", err)
	}
	defer cs.Close()
	png := imagestest.NoisyPNG(11, 40, 30)
	id, err := mcptest.LogImage(ctx, cs, "mcp-stack", png)
	if err != nil {
		t.Fatal(err)
	}
	host := api{t: t, base: s.URL, token: s.DevToken}
	host.built("mcp-stack", id+1, 5*time.Minute)
	res, err := mcptest.ZoomToEntry(ctx, cs, "mcp-stack", id)
	if err != nil {
		t.Fatal(err)
	}
	if sum, mime, ok := mcptest.ImageSum(res); !ok || sum != sha256.Sum256(png) || mime != "image/png" {
		t.Fatalf("zoom to entry %d: image %v (%s), want the logged PNG's bytes; text %q", id, ok, mime, mcptest.Text(res))
	}
	if anon, err := connect(""); err == nil {
		anon.Close()
		t.Fatal("connected through the gateway without a token")
	}
}
