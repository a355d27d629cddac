package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// badMessage is the message of the report: its content holds the bytes
// 0xff 0xfe, which are not UTF-8.
const badMessage = "{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}"

// TestAMessageNotUTF8IsRefusedHoweverItComesIn: whichever way a message
// comes into the log (an append, an import through a server or into the
// data directory, the MCP log tool), bytes that are not UTF-8 are refused
// naming the string, and the chat reads back as JSON with nothing of the
// refused request in it: it would read back as no JSON at all, and
// replacing the bytes would change the record.
func TestAMessageNotUTF8IsRefusedHoweverItComesIn(t *testing.T) {
	session := piSession + `{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":` + badMessage + "}\n"
	file := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(file, []byte(session), 0o600); err != nil {
		t.Fatal(err)
	}
	// The bad message is the line after the session's.
	badLine := fmt.Sprintf("line %d message.content: holds bytes that are not UTF-8", strings.Count(piSession, "\n")+1)
	tests := []struct {
		name string
		// server tells whether send needs the server running; send
		// returns what the refusal said.
		server bool
		send   func(t *testing.T, env map[string]string, base string) string
		says   string
	}{
		{"an append", true, func(t *testing.T, _ map[string]string, base string) string {
			res, err := http.Post(base+"/v1/chats/c1/messages", "application/json", strings.NewReader(`{"messages":[`+badMessage+`]}`))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), `"field":"messages[0].content"`) {
				t.Fatalf("append answered %d %s, want a 400 naming messages[0].content", res.StatusCode, out)
			}
			return string(out)
		}, "messages[0].content: holds bytes that are not UTF-8"},
		{"an import through the server", true, func(t *testing.T, _ map[string]string, base string) string {
			err := run(t.Context(), []string{"import", "-chat", "c1", "-url", base, file}, lookup(nil), io.Discard, nil)
			if err == nil {
				t.Fatal("the import succeeded")
			}
			return err.Error()
		}, badLine},
		{"an import into the data directory", false, func(t *testing.T, env map[string]string, _ string) string {
			err := run(t.Context(), []string{"import", "-chat", "c1", file}, lookup(env), io.Discard, nil)
			if err == nil {
				t.Fatal("the import succeeded")
			}
			return err.Error()
		}, badLine},
		{"the MCP log tool", false, func(t *testing.T, env map[string]string, _ string) string {
			return mcpLog(t, env, json.RawMessage(`{"messages":[{"role":"user","content":"fine"},`+badMessage+`]}`))
		}, "messages[1].content: holds bytes that are not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{config.EnvData: t.TempDir(), config.EnvAddr: "127.0.0.1:0", "DURACHAT_CHAT": "c1"}
			var base string
			if tt.server {
				base, _ = start(t, env)
			}
			if said := tt.send(t, env, base); !strings.Contains(said, tt.says) {
				t.Fatalf("the refusal said %q, want %q", said, tt.says)
			}
			if !tt.server {
				base, _ = start(t, env)
			}
			res, err := http.Get(base + "/v1/chats/c1/messages")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			page, _ := io.ReadAll(res.Body)
			if !utf8.Valid(page) || !json.Valid(page) {
				t.Fatalf("the chat reads back as %q", page)
			}
			if got := messagesOf(t, base, "c1"); len(got) != 0 {
				t.Fatalf("a refused request logged %q", got)
			}
		})
	}
}

// mcpLog calls the log tool of `durachat mcp` on env's data directory
// with args as the host sent them, and returns the tool error it answers.
func mcpLog(t *testing.T, env map[string]string, args json.RawMessage) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	serverT, clientT := sdk.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- mcpCmd(ctx, nil, lookup(env), io.Discard, serverT) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "log", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Fatalf("log answered %q, not a tool error", mcptest.Text(res))
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	<-served
	return mcptest.Text(res)
}
