package mcp_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app/local/localtest"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

func connect(ctx context.Context, url, token string) (*sdk.ClientSession, error) {
	return mcptest.Connect(ctx, url+mcp.Pattern, token)
}

func TestAHostOverHTTPZoomsDownToAnImageAndReceivesItsBytes(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), map[string]string{
		config.EnvTokens: aliceToken + "=alice," + bobToken + "=bob", config.EnvSearch: "on"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cs, err := connect(ctx, srv.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"date", "forget", "log", "search", "view", "zoom"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	png := imagestest.NoisyPNG(7, 32, 24)
	id, err := mcptest.LogImage(ctx, cs, "demo", png)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mcptest.ZoomToEntry(ctx, cs, "demo", id)
	if err != nil {
		t.Fatal(err)
	}
	sum, mime, ok := mcptest.ImageSum(res)
	if !ok || sum != sha256.Sum256(png) || mime != "image/png" {
		t.Fatalf("zoom to entry %d: image %v (%s), want the logged PNG's bytes; text %q", id, ok, mime, mcptest.Text(res))
	}
	name := imageName(res)
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ImageURI("demo", name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || sha256.Sum256(read.Contents[0].Blob) != sha256.Sum256(png) {
		t.Fatalf("the image resource is not the logged PNG")
	}

	t.Run("refused without a token", func(t *testing.T) {
		if s, err := connect(ctx, srv.URL, ""); err == nil {
			s.Close()
			t.Fatal("connected without a token")
		}
	})
	t.Run("another tenant reads nothing of it", func(t *testing.T) {
		bob, err := connect(ctx, srv.URL, bobToken)
		if err != nil {
			t.Fatal(err)
		}
		defer bob.Close()
		if _, err := bob.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ImageURI("demo", name)}); err == nil {
			t.Fatal("bob read alice's image")
		}
		res, err := bob.CallTool(ctx, &sdk.CallToolParams{Name: "zoom", Arguments: map[string]any{"chat": "demo", "id": id}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := mcptest.ImageSum(res); ok || !res.IsError {
			t.Fatalf("bob's zoom into demo answered %q, want a tool error", mcptest.Text(res))
		}
	})
	t.Run("another tenant cannot use a session", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+mcp.Pattern,
			stringsReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+bobToken)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("bob on alice's session: %d, want 404", resp.StatusCode)
		}
	})
	t.Run("errors carry durachat's codes", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "zoom", Arguments: map[string]any{"chat": "no/such", "id": 0}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || code(res) != "bad_request" {
			t.Fatalf("zoom with a bad chat id answered %v %q", res.StructuredContent, mcptest.Text(res))
		}
	})
}

func code(res *sdk.CallToolResult) string {
	m, _ := res.StructuredContent.(map[string]any)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func imageName(res *sdk.CallToolResult) string {
	for _, c := range res.Content {
		if img, ok := c.(*sdk.ImageContent); ok {
			n, _ := img.Meta["name"].(string)
			return n
		}
	}
	return ""
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
