package main

import (
	"context"
	"crypto/sha256"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio command's server, over the SDK's in-memory transport: what
// `durachat mcp` runs on stdin and stdout.
func TestMCPCommandServesTheEmbeddedStoresToAHostWithItsImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serverT, clientT := sdk.NewInMemoryTransports()
	served := make(chan error, 1)
	env := lookup(map[string]string{config.EnvData: t.TempDir(), "DURACHAT_CHAT": "demo"})
	go func() { served <- mcpCmd(ctx, nil, env, io.Discard, serverT) }()

	c := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, nil)
	cs, err := c.Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if _, ok := tl.InputSchema.(map[string]any)["properties"].(map[string]any)["chat"]; ok {
			t.Errorf("%s takes a chat argument, though the server serves one chat", tl.Name)
		}
	}
	slices.Sort(names)
	// Search is off for the chat (DURACHAT_SEARCH is unset): not listed.
	if want := []string{"date", "log", "view", "zoom"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	png := imagestest.NoisyPNG(3, 40, 30)
	id, err := mcptest.LogImage(ctx, cs, "demo", png)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mcptest.ZoomToEntry(ctx, cs, "demo", id)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _, ok := mcptest.ImageSum(res); !ok || sum != sha256.Sum256(png) {
		t.Fatalf("zoom to entry %d did not carry the logged PNG: %q", id, mcptest.Text(res))
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-ctx.Done():
		t.Fatal("the command did not end with its session")
	}
}
