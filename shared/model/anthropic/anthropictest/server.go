// Package anthropictest is a local server speaking the Anthropic Messages
// wire API (streamed), for testing code that calls Anthropic through the
// official SDK without a network or a key.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/durachat/durachat/shared/model/modeltest"
)

// Block is a content block as it arrives on the wire.
type Block struct {
	Type         string `json:"type"`
	Text         string `json:"text,omitempty"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source,omitempty"`
}

// Message is one turn as it arrives on the wire.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Request is a Messages request as it arrives on the wire.
type Request struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	Stream    bool      `json:"stream"`
	System    []Block   `json:"system"`
	Messages  []Message `json:"messages"`
}

// Reply says how the server answers one request.
type Reply struct {
	Text       string
	StopReason string // "end_turn" when empty
	// Status, when set, answers with that HTTP status and an error body of
	// ErrorType instead of a stream.
	Status    int
	ErrorType string
	// StreamError sends an error event of that type after the stream began.
	StreamError string
	// Drop closes the connection without an answer.
	Drop bool
	// CacheRead and CacheWrite are reported as usage.
	CacheRead, CacheWrite int
}

// Server records every request and answers with Reply. Reply is called
// before any byte of the answer is written, so it may block to hold one.
type Server struct {
	modeltest.Server[Request, Reply]
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply func(n int, req Request) Reply) *Server {
	s := &Server{}
	s.Listen(t, reply, s.serve)
	return s
}

// Client is the official SDK client pointed at the server, without SDK
// retries so each call is one request.
func (s *Server) Client() *sdk.Client {
	c := sdk.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	return &c
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad json: "+err.Error())
		return
	}
	n, rep := s.Answer(req)
	switch {
	case rep.Drop:
		modeltest.Hangup(w)
		return
	case rep.Status != 0:
		writeError(w, rep.Status, rep.ErrorType, "scripted failure")
		return
	}
	stop := rep.StopReason
	if stop == "" {
		stop = "end_turn"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1,
			"cache_read_input_tokens": rep.CacheRead, "cache_creation_input_tokens": rep.CacheWrite},
	}})
	if rep.StreamError != "" {
		event("error", map[string]any{"type": "error", "error": map[string]any{"type": rep.StreamError, "message": "scripted stream failure"}})
		return
	}
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": rep.Text}})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 20}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	if kind == "" {
		kind = "api_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}
