// Package bedrocktest is a local server speaking the Bedrock Converse wire
// API, for testing code that calls Bedrock through the official SDK
// without AWS.
package bedrocktest

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/durachat/durachat/shared/model/modeltest"
)

// Block is a Converse content block as it arrives on the wire.
type Block struct {
	Text       *string `json:"text,omitempty"`
	CachePoint *struct {
		Type string `json:"type"`
	} `json:"cachePoint,omitempty"`
	Image *struct {
		Format string `json:"format"`
		Source struct {
			Bytes []byte `json:"bytes"` // base64 on the wire
		} `json:"source"`
	} `json:"image,omitempty"`
}

// Message is one turn as it arrives on the wire.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Request is a Converse request as it arrives on the wire, with its path.
type Request struct {
	Path            string    `json:"-"`
	System          []Block   `json:"system"`
	Messages        []Message `json:"messages"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
}

// Reply says how the server answers one request.
type Reply struct {
	Text       string
	StopReason string // "end_turn" when empty
	// Status, when set, answers with that status and an error of ErrorType
	// (e.g. "ThrottlingException").
	Status    int
	ErrorType string
	// Drop closes the connection without an answer.
	Drop bool
}

// Server answers POST /model/{modelId}/converse with Reply and records
// each request.
type Server struct {
	modeltest.Server[Request, Reply]
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply func(n int, req Request) Reply) *Server {
	s := &Server{}
	s.Listen(t, reply, func(w http.ResponseWriter, r *http.Request) { s.serve(t, w, r) })
	return s
}

// Client is the official SDK client pointed at the server with test
// credentials, one attempt per call.
func (s *Server) Client() *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func (s *Server) serve(t testing.TB, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req Request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		t.Errorf("bedrocktest: request body: %v", err)
	}
	if r.Method != http.MethodPost || r.Header.Get("Authorization") == "" {
		t.Errorf("bedrocktest: %s %s without a signature", r.Method, r.URL.Path)
	}
	req.Path = r.URL.EscapedPath()
	_, rep := s.Answer(req)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case rep.Drop:
		modeltest.Hangup(w)
		return
	case rep.Status != 0:
		w.Header().Set("X-Amzn-Errortype", rep.ErrorType)
		w.WriteHeader(rep.Status)
		json.NewEncoder(w).Encode(map[string]string{"message": "scripted " + rep.ErrorType})
		return
	}
	stop := rep.StopReason
	if stop == "" {
		stop = "end_turn"
	}
	json.NewEncoder(w).Encode(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"text": rep.Text}}}},
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": 120, "outputTokens": 30, "totalTokens": 150, "cacheReadInputTokens": 80, "cacheWriteInputTokens": 0},
		"metrics":    map[string]any{"latencyMs": 5},
	})
}
