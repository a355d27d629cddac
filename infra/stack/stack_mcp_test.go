package stack_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
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
// function, stateless, at 2025-11-25 and at 2026-07-28 (server/discover,
// each request alone). It logs an image, waits for the view through the
// queue, zooms down to the image and compares its bytes; without a token
// the authorizer refuses the connection, and the endpoint's Protected
// Resource Metadata, public, names the stack's issuer.
func mcpThroughTheGateway(t *testing.T, s *stack.Stack) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, version := range []string{mcptest.SessionVersion, mcp.StatelessVersion} {
		connect := func(token string) (*sdk.ClientSession, error) {
			return mcptest.ConnectAt(ctx, s.URL+mcp.Pattern, token, version)
		}
		cs, err := connect(s.DevToken)
		if err != nil {
			t.Fatalf("connecting at %s with the dev token: %v", version, err)
		}
		defer cs.Close()
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("asked for %s, negotiated %s", version, got)
		}
		chat := "mcp-stack-" + version
		png := imagestest.NoisyPNG(11, 40, 30)
		id, err := mcptest.LogImage(ctx, cs, chat, png)
		if err != nil {
			t.Fatal(err)
		}
		host := api{t: t, base: s.URL, token: s.DevToken}
		host.built(chat, id+1, 5*time.Minute)
		res, err := mcptest.ZoomToEntry(ctx, cs, chat, id)
		if err != nil {
			t.Fatal(err)
		}
		if sum, mime, ok := mcptest.ImageSum(res); !ok || sum != sha256.Sum256(png) || mime != "image/png" {
			t.Fatalf("at %s zoom to entry %d: image %v (%s), want the logged PNG's bytes; text %q", version, id, ok, mime, mcptest.Text(res))
		}
		if anon, err := connect(""); err == nil {
			anon.Close()
			t.Fatalf("connected at %s through the gateway without a token", version)
		}
	}
	resp, err := http.Get(s.URL + "/.well-known/oauth-protected-resource/v1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || resp.StatusCode != http.StatusOK ||
		len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != s.Issuer.URL || !strings.HasSuffix(md.Resource, mcp.Pattern) {
		t.Fatalf("the MCP endpoint's metadata: %d %+v %v, want the issuer %s", resp.StatusCode, md, err, s.Issuer.URL)
	}
}
