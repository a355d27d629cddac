// Package openaitest is a local server speaking the Chat Completions wire
// API, for testing code that calls an OpenAI-compatible endpoint through
// the official SDK without a network or a key.
package openaitest

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/durachat/durachat/shared/model/modeltest"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// APIKey is the key the server expects.
const APIKey = "test-key"

// Part is one content part as it arrives on the wire.
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// Message is one turn as it arrives on the wire. Content is a string or a
// list of parts; Parts holds it as parts either way.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Parts   []Part          `json:"-"`
}

// Request is a Chat Completions request as it arrives on the wire.
type Request struct {
	Model               string    `json:"model"`
	Messages            []Message `json:"messages"`
	MaxCompletionTokens int       `json:"max_completion_tokens"`
	MaxTokens           int       `json:"max_tokens"`
}

// Reply says how the server answers one request.
type Reply struct {
	Text         string
	FinishReason string // "stop" when empty
	Refusal      string
	// Status, when set, answers with that status and an error with Code.
	Status int
	Code   string
	// Drop closes the connection without an answer.
	Drop bool
}

// Server answers POST /v1/chat/completions with Reply.
type Server struct {
	modeltest.Server[Request, Reply]
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply func(n int, req Request) Reply) *Server {
	s := &Server{}
	s.Listen(t, reply, func(w http.ResponseWriter, r *http.Request) { s.serve(t, w, r) })
	return s
}

// BaseURL is the API root to configure a client with.
func (s *Server) BaseURL() string { return s.URL + "/v1/" }

// Client is the official SDK client pointed at the server, one attempt
// per call.
func (s *Server) Client() *sdk.Client {
	c := sdk.NewClient(option.WithBaseURL(s.BaseURL()), option.WithAPIKey(APIKey), option.WithMaxRetries(0))
	return &c
}

func (s *Server) serve(t testing.TB, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		t.Errorf("openaitest: unexpected %s %s", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+APIKey {
		t.Errorf("openaitest: authorization %q", got)
	}
	body, err := io.ReadAll(r.Body)
	var req Request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		t.Errorf("openaitest: request body: %v", err)
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			m.Parts = []Part{{Type: "text", Text: text}}
		} else if err := json.Unmarshal(m.Content, &m.Parts); err != nil {
			t.Errorf("openaitest: message %d content: %v", i, err)
		}
	}
	_, rep := s.Answer(req)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case rep.Drop:
		modeltest.Hangup(w)
		return
	case rep.Status != 0:
		w.WriteHeader(rep.Status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "scripted", "type": "error", "code": rep.Code}})
		return
	}
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
	}
	var refusal any
	if rep.Refusal != "" {
		refusal = rep.Refusal
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": "c1", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": rep.Text, "refusal": refusal}}},
		"usage": map[string]any{"prompt_tokens": 90, "completion_tokens": 12, "total_tokens": 102,
			"prompt_tokens_details": map[string]any{"cached_tokens": 64}},
	})
}
