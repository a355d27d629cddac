package stack_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
		len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != s.Issuer.URL || md.Resource != s.URL+mcp.Pattern {
		t.Fatalf("the MCP endpoint's metadata: %d %+v %v, want the issuer %s", resp.StatusCode, md, err, s.Issuer.URL)
	}
}

// mcpSignInThroughTheGateway is the sign-in of an MCP host that speaks
// MCP's authorization, with the official TypeScript SDK's OAuth client
// (clients/mcp-test/stack/sign-in.mjs): refused, it finds the endpoint's
// Protected Resource Metadata through the gateway (at the well-known path
// behind the authorizer's bare 401; by the resource_metadata of
// durachat's own 401 to a token without the tenant claim), the stack's
// issuer there, the issuer's metadata, and sends the user to its
// authorization endpoint; a token the issuer minted then lets it in. It
// skips without Node or the SDK installed, except in CI.
func mcpSignInThroughTheGateway(t *testing.T, s *stack.Stack) {
	dir := filepath.Join("..", "..", "clients", "mcp-test")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Node and the TypeScript SDK (make tools-mcp-ts): %v", err)
		}
		t.Skipf("Node and the TypeScript SDK (make tools-mcp-ts): %v", err)
	}
	noTenant, err := s.Issuer.Token(map[string]any{"aud": stack.Audience}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("stack", "sign-in.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s.URL+mcp.Pattern, "ISSUER="+s.Issuer.URL, "CLIENT_ID="+stack.Audience,
		"TOKEN="+s.DevToken, "NO_TENANT="+noTenant)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript SDK's sign-in through the gateway: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
