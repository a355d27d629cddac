package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeMemory answers zoom with its result, and blocks every other call
// until its context ends, as a store that does not answer.
type fakeMemory struct{ zoom wire.ToolResult }

func (f fakeMemory) View(ctx context.Context, chat string, wait bool) (wire.View, error) {
	<-ctx.Done()
	return wire.View{}, ctx.Err()
}
func (f fakeMemory) CallTool(ctx context.Context, chat, name string, args json.RawMessage) (wire.ToolResult, error) {
	switch name {
	case wire.ToolZoom:
		return f.zoom, nil
	case wire.ToolDate:
		return wire.ToolResult{}, store.ErrUnavailable
	}
	return wire.ToolResult{}, nil
}
func (f fakeMemory) Settings(ctx context.Context, chat string) (memory.Settings, error) {
	return memory.AllOn, nil
}
func (f fakeMemory) Log(ctx context.Context, chat string, req transcript.AppendRequest) ([]int64, error) {
	return nil, nil
}
func (f fakeMemory) Image(ctx context.Context, chat, name string) ([]byte, string, error) {
	return nil, "", nil
}

func session(t *testing.T, mem Memory, o Options) *sdk.ClientSession {
	t.Helper()
	s, err := NewServer(mem, o)
	if err != nil {
		t.Fatal(err)
	}
	return mcptest.InMemory(t, s.SDK())
}

func TestZoomImagesSpendTheBudgetNewestFirstAndLinkTheRest(t *testing.T) {
	// Three images of 2 MB of base64 each: the budget (4.5 MB) takes the
	// two newest; the oldest is a resource link.
	big := strings.Repeat("A", 2_000_000)
	names := []string{"000000000000000a", "000000000000000b", "000000000000000c"}
	res := wire.ToolResult{Content: []wire.Block{{Type: "text", Text: "[image " + names[0] + "] [image " + names[1] + "] [image " + names[2] + "]"}}}
	for _, n := range names {
		res.Content = append(res.Content, wire.Block{Type: "image", Data: big, MimeType: "image/png", Name: n})
	}
	if 3*len(big) <= hooks.DefaultBudget || 2*len(big) > hooks.DefaultBudget {
		t.Fatal("the images do not straddle the budget")
	}
	cs := session(t, fakeMemory{zoom: res}, Options{Chat: "c"})
	got, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "zoom", Arguments: map[string]any{"id": 0}})
	if err != nil {
		t.Fatal(err)
	}
	var inline, linked []string
	for _, c := range got.Content {
		switch c := c.(type) {
		case *sdk.ImageContent:
			inline = append(inline, c.Meta["name"].(string))
			if want, _ := base64.StdEncoding.DecodeString(big); len(c.Data) != len(want) {
				t.Errorf("image %v: %d bytes", c.Meta["name"], len(c.Data))
			}
		case *sdk.ResourceLink:
			linked = append(linked, c.URI)
		}
	}
	if strings.Join(inline, ",") != names[1]+","+names[2] || len(linked) != 1 || linked[0] != ImageURI("c", names[0]) {
		t.Fatalf("inline %v, linked %v; want the two newest inline and the oldest linked", inline, linked)
	}
}

func TestAnOutageIsARetryableToolErrorNeverAHang(t *testing.T) {
	cs := session(t, fakeMemory{}, Options{Chat: "c", Timeout: 50 * time.Millisecond})
	for _, tool := range []string{"view", "date"} {
		done := make(chan *sdk.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"id": 0}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		select {
		case res := <-done:
			if res == nil {
				return
			}
			e, _ := res.StructuredContent.(map[string]any)["error"].(map[string]any)
			if !res.IsError || e["code"] != "unavailable" || e["retryAfterSeconds"] != float64(10) {
				t.Errorf("%s: %v %v, want a retryable unavailable tool error", tool, res.IsError, res.StructuredContent)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s hung past its timeout", tool)
		}
	}
}

// TestALogsAppendOutlivesItsCallerButNotItsDeadline: a log call's append
// is not ended by its caller's cancellation, but ends by LogTimeout, and
// before the caller's own deadline (a Lambda request's) by answerMargin,
// so the answer still goes out.
func TestALogsAppendOutlivesItsCallerButNotItsDeadline(t *testing.T) {
	s, err := NewServer(fakeMemory{}, Options{Chat: "c", LogTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	caller, cancel := context.WithCancel(context.Background())
	actx, done, _ := s.appendContext(caller)
	defer done()
	cancel()
	d, ok := actx.Deadline()
	if actx.Err() != nil || !ok || time.Until(d) > time.Hour {
		t.Fatalf("the append's context: err %v, deadline %v; want it alive after its caller's cancellation, and ended by LogTimeout", actx.Err(), d)
	}

	due := time.Now().Add(10 * time.Minute)
	lambda, cancel := context.WithDeadline(context.Background(), due)
	defer cancel()
	actx, done, _ = s.appendContext(lambda)
	defer done()
	if d, ok := actx.Deadline(); !ok || d.After(due.Add(-answerMargin)) {
		t.Fatalf("the append ends at %v, want at least %v before its caller's deadline %v", d, answerMargin, due)
	}
}

// TestEachToolsAnnotationsSayWhatItDoesToTheMemory: view, zoom, date and
// search only read; log writes and is idempotent under its receipt;
// forget erases for good and is idempotent by request; none reaches the
// world outside the chat's memory.
func TestEachToolsAnnotationsSayWhatItDoesToTheMemory(t *testing.T) {
	type hints struct{ readOnly, destructive, idempotent bool }
	want := map[string]hints{
		"view":          {readOnly: true},
		wire.ToolZoom:   {readOnly: true},
		wire.ToolDate:   {readOnly: true},
		wire.ToolSearch: {readOnly: true},
		"log":           {idempotent: true},
		wire.ToolForget: {destructive: true, idempotent: true},
	}
	cs := session(t, fakeMemory{}, Options{Chat: "c", OptIn: true})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tl := range res.Tools {
		w, ok := want[tl.Name]
		if !ok {
			t.Errorf("tool %s: no annotations expected of it; add it to this table", tl.Name)
			continue
		}
		seen[tl.Name] = true
		a := tl.Annotations
		if a == nil {
			t.Errorf("tool %s has no annotations", tl.Name)
			continue
		}
		got := hints{readOnly: a.ReadOnlyHint, destructive: a.DestructiveHint != nil && *a.DestructiveHint, idempotent: a.IdempotentHint}
		if !a.ReadOnlyHint && a.DestructiveHint == nil {
			t.Errorf("tool %s writes but leaves destructiveHint to its default (true)", tl.Name)
		}
		if got != w {
			t.Errorf("tool %s: hints %+v, want %+v", tl.Name, got, w)
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("tool %s: openWorldHint is not false", tl.Name)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("tool %s is not listed", name)
		}
	}
}
