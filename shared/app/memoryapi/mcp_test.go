package memoryapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// slowCommit is a table whose first write of an entry (the claim that
// commits an append) is slow: it waits for wait(ctx) first, then lands
// whatever became of its caller meanwhile, as a write under way does, and
// reports the caller's deadline when it passed.
type slowCommit struct {
	store.Table
	wait    func(ctx context.Context)
	taken   atomic.Bool
	entered chan struct{}
}

func (s *slowCommit) Create(ctx context.Context, it store.Item) error {
	if !strings.HasPrefix(it.Key.SK, store.EntryPrefix) || !s.taken.CompareAndSwap(false, true) {
		return s.Table.Create(ctx, it)
	}
	close(s.entered)
	s.wait(ctx)
	err := s.Table.Create(context.WithoutCancel(ctx), it)
	if ctx.Err() != nil {
		return store.Unavailable("create", ctx.Err())
	}
	return err
}

// logServer is the MCP server of chat "c" of tenant "t" over embedded
// stores whose table is slow, and a function counting the chat's entries.
func logServer(t *testing.T, slow *slowCommit, o mcp.Options) (*sdk.ClientSession, func() int64) {
	t.Helper()
	b := testenv.Embedded(t)
	slow.Table, slow.entered = b.Table, make(chan struct{})
	stores := app.Stores{Table: slow, Blobs: b.Blobs, Linker: b.Linker, Queue: b.Queue, Receiver: b.Receiver}
	a, err := memoryapi.New(config.Config{}, stores, memoryapi.Models{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Chat = "c"
	s, err := mcp.NewServer(a.MCP("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	cs := mcptest.InMemory(t, s.SDK())
	ctx := context.Background()
	entries := func() int64 {
		c, _, err := chatid.New(b.Table).Current(ctx, "t", "c")
		if err != nil {
			t.Fatal(err)
		}
		n, err := a.Transcript.Len(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return cs, entries
}

var twoMessages = []any{
	map[string]any{"role": "user", "content": "Why does the login page fail?", "timestamp": 1718000000000},
	map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "The session cookie expired."}},
		"provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": 1718000001000},
}

// logAnswer is a log call's answer: the ids, or the error it answered.
type logAnswer struct {
	IDs   []int64        `json:"ids"`
	Error map[string]any `json:"error"`
	text  string
}

func callLog(t *testing.T, cs *sdk.ClientSession, args map[string]any) logAnswer {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "log", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var a logAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	a.text = mcptest.Text(res)
	return a
}

// inTime is the answer of call, failing the test when it takes longer
// than only a hang would.
func inTime(t *testing.T, call func() logAnswer) logAnswer {
	t.Helper()
	done := make(chan logAnswer, 1)
	go func() { done <- call() }()
	select {
	case a := <-done:
		return a
	case <-time.After(time.Minute):
		t.Fatal("the log call hung")
	}
	return logAnswer{}
}

// TestALogSlowerThanTheCallTimeoutAnswersItsIDsAndARetryLogsNothingTwice:
// the append of a log call runs past the call's timeout to its end and
// the call answers its ids; the host's retry of the same messages (no
// receipt either time) answers the same ids, and the chat holds each
// message once.
func TestALogSlowerThanTheCallTimeoutAnswersItsIDsAndARetryLogsNothingTwice(t *testing.T) {
	release := make(chan struct{})
	slow := &slowCommit{wait: func(context.Context) { <-release }}
	const timeout = 20 * time.Millisecond
	cs, entries := logServer(t, slow, mcp.Options{Timeout: timeout, LogTimeout: time.Minute})

	done := make(chan logAnswer, 1)
	go func() { done <- callLog(t, cs, map[string]any{"messages": twoMessages}) }()
	var first logAnswer
	select {
	case <-slow.entered:
		// The call started before its append reached the commit: once
		// its timeout has gone by from here, it has gone by for the call.
		<-time.After(timeout)
		close(release)
		first = inTime(t, func() logAnswer { return <-done })
	case first = <-done:
		close(release)
	}
	if len(first.IDs) != 2 {
		t.Errorf("a log slower than the call timeout answered %q, want its two ids", first.text)
	}
	retry := inTime(t, func() logAnswer { return callLog(t, cs, map[string]any{"messages": twoMessages}) })
	if len(retry.IDs) != 2 || (len(first.IDs) == 2 && !slices.Equal(retry.IDs, first.IDs)) {
		t.Errorf("the retry answered %q, want the ids %v again", retry.text, first.IDs)
	}
	if n := entries(); n != 2 {
		t.Errorf("the chat holds %d entries after a log of two messages and its retry, want 2", n)
	}
}

// TestALogCutOffAtItsBoundSaysTheMessagesMayBeLogged: an append still
// unfinished at the log call's bound, whose commit lands all the same, is
// answered as what it is: unavailable, the messages perhaps logged, and
// the receipt under which a retry logs nothing twice. The retry with that
// receipt, and one with the same messages alone, answer the same ids; the
// chat holds each message once.
func TestALogCutOffAtItsBoundSaysTheMessagesMayBeLogged(t *testing.T) {
	slow := &slowCommit{wait: func(ctx context.Context) { <-ctx.Done() }}
	cs, entries := logServer(t, slow, mcp.Options{Timeout: 20 * time.Millisecond, LogTimeout: time.Second})

	first := inTime(t, func() logAnswer { return callLog(t, cs, map[string]any{"messages": twoMessages}) })
	receipt, _ := first.Error["receipt"].(string)
	if first.Error["code"] != "unavailable" || first.Error["logged"] != "unknown" || receipt == "" ||
		!strings.Contains(first.text, "may have been logged") || !strings.Contains(first.text, receipt) {
		t.Errorf("a log cut off at its bound answered %q %v, want unavailable saying the messages may have been logged, with the receipt to retry with",
			first.text, first.Error)
	}
	withReceipt := inTime(t, func() logAnswer {
		return callLog(t, cs, map[string]any{"receipt": receipt, "messages": twoMessages})
	})
	alone := inTime(t, func() logAnswer { return callLog(t, cs, map[string]any{"messages": twoMessages}) })
	if len(withReceipt.IDs) != 2 || !slices.Equal(alone.IDs, withReceipt.IDs) {
		t.Errorf("retries answered %q and %q, want the same two ids", withReceipt.text, alone.text)
	}
	if n := entries(); n != 2 {
		t.Errorf("the chat holds %d entries after a log of two messages and its retries, want 2", n)
	}
}

// TestAnImageResourceIsReadOnlyThroughAChatThatNamesIt: resources/read of
// durachat://chats/{chat}/images/{name} answers the image through a chat
// that names it, and resource not found, as for an image not stored,
// through any other: another chat of the tenant, an id with no chat, the
// same chat id of another tenant.
func TestAnImageResourceIsReadOnlyThroughAChatThatNamesIt(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			stores := app.Stores{Table: b.Table, Blobs: b.Blobs, Linker: b.Linker, Queue: b.Queue, Receiver: b.Receiver}
			a, err := memoryapi.New(config.Config{}, stores, memoryapi.Models{}, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			session := func(tenant string) *sdk.ClientSession {
				s, err := mcp.NewServer(a.MCP(tenant), mcp.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return mcptest.InMemory(t, s.SDK())
			}
			alice, bob := session("alice"), session("bob")
			shot := tinyPNG(t)
			name := images.NameBytes(shot)
			if _, err := mcptest.LogImage(ctx, alice, "a", shot); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				cs   *sdk.ClientSession
				chat string
			}{{alice, "b"}, {bob, "a"}} {
				if _, err := mcptest.Call(ctx, c.cs, "log", map[string]any{"chat": c.chat, "messages": []any{
					map[string]any{"role": "user", "content": "names no image"}}}); err != nil {
					t.Fatal(err)
				}
			}
			tests := []struct {
				name  string
				cs    *sdk.ClientSession
				chat  string
				found bool
			}{
				{"ChatThatNamesIt", alice, "a", true},
				{"OtherChatOfTheTenant", alice, "b", false},
				{"IdWithNoChat", alice, "nochat", false},
				{"OtherTenantsChatOfTheSameId", bob, "a", false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					res, err := tt.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ImageURI(tt.chat, name)})
					if tt.found {
						if err != nil || len(res.Contents) != 1 || !bytes.Equal(res.Contents[0].Blob, shot) {
							t.Fatalf("read through %s: %v, want the image", tt.chat, err)
						}
						return
					}
					var rpc *jsonrpc.Error
					if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || rpc.Message != "Resource not found" {
						t.Fatalf("read through %s: %v (%+v), want resource not found", tt.chat, err, res)
					}
				})
			}
		})
	}
}

// tinyPNG is a 2x2 PNG, stored as it is sent.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{12, 34, 56, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
