package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/app/local/localtest"
)

// wireRequest is the part of a Messages request the fake model reads.
type wireRequest struct {
	System   []struct{ Text string } `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct{ Name string } `json:"tools"`
}

// wireBlock is a content block of a request, tool results included.
type wireBlock struct {
	Type    string      `json:"type"`
	Text    string      `json:"text"`
	Content []wireBlock `json:"content"`
	Source  *struct {
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// fakeModel is an Anthropic Messages server that plays a script: each
// request gets the next answer's content blocks. It keeps the requests.
type fakeModel struct {
	mu       sync.Mutex
	script   []string
	requests []wireRequest
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if n >= len(f.script) {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"script ended"}}`, http.StatusBadRequest)
		return
	}
	stop := "end_turn"
	if strings.Contains(f.script[n], "tool_use") {
		stop = "tool_use"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"fake","content":[%s],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, n, f.script[n], stop)
}

// toolResultImages decodes the images in the tool results of a request's
// last message.
func toolResultImages(t *testing.T, req wireRequest) []string {
	t.Helper()
	var blocks []wireBlock
	if err := json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks); err != nil {
		t.Fatal(err)
	}
	var media []string
	for _, b := range blocks {
		for _, c := range b.Content {
			if c.Type == "image" && c.Source != nil {
				data, err := base64.StdEncoding.DecodeString(c.Source.Data)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := png.Decode(strings.NewReader(string(data))); err != nil {
					t.Fatalf("the restored image is not a PNG: %v", err)
				}
				media = append(media, c.Source.MediaType)
			}
		}
	}
	return media
}

func TestTheAgentSendsItsScreenshotAsAnImageAndZoomsBackToIt(t *testing.T) {
	srv, err := localtest.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	model := &fakeModel{script: []string{
		`{"type":"tool_use","id":"tu_1","name":"screenshot","input":{}}`,
		// Entries: 0 the prompt, 1 the tool call, 2 its result.
		`{"type":"tool_use","id":"tu_2","name":"zoom","input":{"id":2}}`,
		`{"type":"text","text":"A login form with a red button."}`,
	}}
	ms := httptest.NewServer(model)
	defer ms.Close()
	env := map[string]string{"DURACHAT_URL": srv.URL, "DURACHAT_CHAT": "agent", "ANTHROPIC_BASE_URL": ms.URL}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, []string{"What", "is", "on", "the", "screen?"}, func(k string) string { return env[k] }, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "A login form with a red button.\n" {
		t.Fatalf("answer = %q", out.String())
	}
	if len(model.requests) != 3 {
		t.Fatalf("model calls = %d, want 3", len(model.requests))
	}
	first := model.requests[0]
	if !strings.Contains(first.System[0].Text, "<chat>") || len(first.Tools) != 3 {
		t.Fatalf("first request: system %q, %d tools; want the view and screenshot, zoom, date", first.System[0].Text, len(first.Tools))
	}
	for i, what := range []string{"the screenshot", "the zoomed entry"} {
		if got := toolResultImages(t, model.requests[i+1]); len(got) != 1 || got[0] != "image/png" {
			t.Fatalf("request %d carries images %v, want %s as one PNG", i+2, got, what)
		}
	}

	// durachat's log holds the screenshot as a ref, and the image once.
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.Chat("agent").Zoom(ctx, client.ZoomArgs{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.Content.Text(), "[image ") {
		t.Fatalf("logged result = %q, want its ref", page.Content.Text())
	}
}

func TestAPromptIsRequired(t *testing.T) {
	if err := run(context.Background(), nil, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("err = %v, want the usage", err)
	}
}
