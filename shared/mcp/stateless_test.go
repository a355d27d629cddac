package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
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

// The local server speaks 2026-07-28 beside the revisions with sessions:
// a host that asks for it discovers the server and sends each request
// alone (no initialize, no session); it logs an image and zooms down to
// its bytes; the lists and reads carry cache hints private to the
// tenant, an image kept longer than the view, which each turn changes;
// and a host asking for 2025-11-25 still gets a session.
func TestAHostAt20260728IsServedWithoutASessionBesideTheSessions(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), map[string]string{config.EnvTokens: aliceToken + "=alice," + bobToken + "=bob"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cs, err := mcptest.ConnectAt(ctx, srv.URL+mcp.Pattern, aliceToken, mcp.StatelessVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != mcp.StatelessVersion || cs.ID() != "" {
		t.Fatalf("negotiated %q with session %q, want %s and none", v, cs.ID(), mcp.StatelessVersion)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools.CacheScope != "private" || tools.TTLMs != int(mcp.ListTTL/time.Millisecond) {
		t.Errorf("tools/list cache hints %+v", tools.Cacheable)
	}
	png := imagestest.NoisyPNG(3, 20, 12)
	id, err := mcptest.LogImage(ctx, cs, "modern", png)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mcptest.ZoomToEntry(ctx, cs, "modern", id)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _, ok := mcptest.ImageSum(res); !ok || sum != sha256.Sum256(png) {
		t.Fatalf("zoom to entry %d: no image of the logged bytes; text %q", id, mcptest.Text(res))
	}
	img, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ImageURI("modern", imageName(res))})
	if err != nil {
		t.Fatal(err)
	}
	view, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ViewURI("modern")})
	if err != nil {
		t.Fatal(err)
	}
	if img.CacheScope != "private" || img.TTLMs != int(mcp.ImageTTL/time.Millisecond) || view.CacheScope != "private" || view.TTLMs != 0 {
		t.Errorf("resources/read cache hints: image %+v, view %+v", img.Cacheable, view.Cacheable)
	}

	t.Run("another tenant reads nothing of it", func(t *testing.T) {
		bob, err := mcptest.ConnectAt(ctx, srv.URL+mcp.Pattern, bobToken, mcp.StatelessVersion)
		if err != nil {
			t.Fatal(err)
		}
		defer bob.Close()
		if _, err := bob.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ImageURI("modern", imageName(res))}); err == nil {
			t.Fatal("bob read alice's image")
		}
	})
	t.Run("refused without a token", func(t *testing.T) {
		status, _ := rawModern(ctx, t, srv.URL, "", "server/discover")
		if status != http.StatusUnauthorized {
			t.Fatalf("server/discover without a token: %d, want 401", status)
		}
	})
	t.Run("a request alone names no session", func(t *testing.T) {
		status, body := rawModern(ctx, t, srv.URL, aliceToken, "tools/list")
		var out struct {
			Result struct {
				Tools []json.RawMessage
			}
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Result.Tools) == 0 {
			t.Fatalf("tools/list alone: %d %.300s", status, body)
		}
	})
	t.Run("a host asking for 2025-11-25 gets a session", func(t *testing.T) {
		old, err := mcptest.Connect(ctx, srv.URL+mcp.Pattern, aliceToken)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if old.ID() == "" || old.InitializeResult().ProtocolVersion != mcptest.SessionVersion {
			t.Fatalf("session %q at %q", old.ID(), old.InitializeResult().ProtocolVersion)
		}
	})
}

// modernMeta is the _meta a 2026-07-28 request carries.
const modernMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// rawModern posts a request of method with params at 2026-07-28 with
// token; it fails the test if the answer names a session.
func rawModern(ctx context.Context, t *testing.T, url, token, method string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":` + modernMeta + `}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+mcp.Pattern, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Mcp-Protocol-Version", mcp.StatelessVersion)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		t.Errorf("an answer at %s named session %q", mcp.StatelessVersion, id)
	}
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}
