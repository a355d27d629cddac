package memoryapi_test

import (
	"context"
	"encoding/json"
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
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
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
	a, err := memoryapi.New(config.Config{}, stores, nil, slog.New(slog.DiscardHandler), nil)
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
