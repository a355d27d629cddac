// Package mcptest drives durachat's MCP server with the Go SDK's client,
// as a host does: it logs a message with an image and zooms down the view
// to it.
package mcptest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionVersion is the newest protocol revision with sessions.
const SessionVersion = "2025-11-25"

// Connect opens a session (at SessionVersion) with the MCP endpoint at
// endpoint (a server's URL and the endpoint's path), sending token as a
// bearer token unless it is empty. The SDK's client does not retry: a
// refusal is the answer.
func Connect(ctx context.Context, endpoint, token string) (*sdk.ClientSession, error) {
	return ConnectAt(ctx, endpoint, token, SessionVersion)
}

// ConnectAt is Connect asking for protocol version: from 2026-07-28 on,
// the client discovers the server (server/discover) and sends each
// request alone, with no session.
func ConnectAt(ctx context.Context, endpoint, token, version string) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
}

// InMemory runs srv on the SDK's in-memory transport until the test ends
// and returns a host's session with it, as `durachat mcp` is reached over
// stdio.
func InMemory(t testing.TB, srv *sdk.Server) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// LogImage logs, with the log tool, a text message and then a message
// holding image png, and returns the image's entry id.
func LogImage(ctx context.Context, cs *sdk.ClientSession, chat string, png []byte) (int64, error) {
	args := map[string]any{"chat": chat, "receipt": "mcptest-" + chat, "messages": []any{
		map[string]any{"role": "user", "content": "Why does the login page fail?"},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Here is the screenshot."},
			map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(png), "mimeType": "image/png"},
		}},
	}}
	res, err := Call(ctx, cs, "log", args)
	if err != nil {
		return 0, err
	}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal([]byte(Text(res)), &out); err != nil || len(out.IDs) != 2 {
		return 0, fmt.Errorf("log answered %q", Text(res))
	}
	return out.IDs[1], nil
}

// Call calls tool with args and fails on a tool error.
func Call(ctx context.Context, cs *sdk.ClientSession, tool string, args map[string]any) (*sdk.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", tool, err)
	}
	if res.IsError {
		return res, fmt.Errorf("%s answered a tool error: %s", tool, Text(res))
	}
	return res, nil
}

// Text joins a result's text content.
func Text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var line = regexp.MustCompile(`(?m)^(\d+)\+(\d+)\|`)

// ZoomToEntry reads the view with the view tool and zooms down, from the
// view line that holds entry id through each half holding it, to the
// original entry, and returns that zoom's result.
func ZoomToEntry(ctx context.Context, cs *sdk.ClientSession, chat string, id int64) (*sdk.CallToolResult, error) {
	res, err := Call(ctx, cs, "view", map[string]any{"chat": chat})
	if err != nil {
		return nil, err
	}
	for range 64 {
		start, n, ok := holding(Text(res), id)
		if !ok {
			return nil, fmt.Errorf("no line holds entry %d in %q", id, Text(res))
		}
		if res, err = Call(ctx, cs, "zoom", map[string]any{"chat": chat, "id": start, "n": n}); err != nil {
			return nil, err
		}
		if n == 1 {
			return res, nil
		}
	}
	return nil, fmt.Errorf("zoom did not reach entry %d", id)
}

// holding is the block of the lines in text that holds entry id.
func holding(text string, id int64) (start, n int64, ok bool) {
	for _, m := range line.FindAllStringSubmatch(text, -1) {
		s, _ := strconv.ParseInt(m[1], 10, 64)
		c, _ := strconv.ParseInt(m[2], 10, 64)
		if s <= id && id < s+c {
			return s, c, true
		}
	}
	return 0, 0, false
}

// ImageSum is the SHA-256 of the first image content of res, and its MIME
// type.
func ImageSum(res *sdk.CallToolResult) (sum [32]byte, mime string, ok bool) {
	for _, c := range res.Content {
		if img, isImage := c.(*sdk.ImageContent); isImage {
			return sha256.Sum256(img.Data), img.MIMEType, true
		}
	}
	return sum, "", false
}
