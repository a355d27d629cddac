package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/app/local/localtest"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
)

// TestTheLogToolOverAnAPILogsTheMessagesAsSentAndARetryOnce: `durachat mcp
// -url` logs through the API the messages as the host sent them, every
// field kept, under a receipt made of them when the host sends none, so
// the same call again answers the same ids and logs nothing twice.
func TestTheLogToolOverAnAPILogsTheMessagesAsSentAndARetryOnce(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), map[string]string{config.EnvTokens: aliceToken + "=alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(srv.URL, client.WithToken(aliceToken))
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.NewServer(mcp.Remote(c), mcp.Options{Chat: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptest.InMemory(t, s.SDK())

	args := map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "Take a screenshot of the login page.", "timestamp": 1718000000000},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "toolCall", "id": "call_1", "name": "screenshot", "arguments": map[string]any{"url": "https://example.com/login"}}},
			"usage": map[string]any{"input": 120, "output": 40}, "stopReason": "toolUse", "timestamp": 1718000001000},
	}}
	var ids [][]int64
	for range 2 {
		res, err := mcptest.Call(ctx, cs, "log", args)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			IDs []int64 `json:"ids"`
		}
		if err := json.Unmarshal([]byte(mcptest.Text(res)), &out); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.IDs)
	}
	if len(ids[0]) != 2 || !slices.Equal(ids[0], ids[1]) {
		t.Fatalf("a log and its repeat answered %v and %v, want the same two ids", ids[0], ids[1])
	}
	page, err := c.Chat("demo").Messages(ctx, client.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 {
		t.Fatalf("the chat holds %d messages, want 2", len(page.Messages))
	}
	if raw := string(page.Messages[1].Raw); !strings.Contains(raw, `"usage"`) || !strings.Contains(raw, `"arguments":{"url":"https://example.com/login"}`) {
		t.Fatalf("the assistant message reads back as %s, want its usage and its tool call's arguments object kept", raw)
	}
}
