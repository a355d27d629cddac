package bedrock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/durachat/durachat/shared/model"
)

// wireBlock is a Converse content block as it arrives on the wire.
type wireBlock struct {
	Text       *string `json:"text"`
	CachePoint *struct {
		Type string `json:"type"`
	} `json:"cachePoint"`
	Image *struct {
		Format string `json:"format"`
		Source struct {
			Bytes string `json:"bytes"`
		} `json:"source"`
	} `json:"image"`
}

type wireRequest struct {
	System   []wireBlock `json:"system"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
}

// reply is how the fake Converse endpoint answers.
type reply struct {
	status    int
	errorType string
	drop      bool
	text      string
	stop      string
}

type converseServer struct {
	*httptest.Server
	mu       sync.Mutex
	paths    []string
	requests []wireRequest
}

// newServer answers POST /model/{modelId}/converse as Converse does.
func newServer(t *testing.T, rep reply) *converseServer {
	s := &converseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req wireRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		s.mu.Lock()
		s.paths = append(s.paths, r.Method+" "+r.URL.EscapedPath())
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		if r.Header.Get("Authorization") == "" {
			t.Error("request is not signed")
		}
		switch {
		case rep.drop:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case rep.status != 0:
			w.Header().Set("X-Amzn-Errortype", rep.errorType)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.status)
			json.NewEncoder(w).Encode(map[string]string{"message": "scripted " + rep.errorType})
			return
		}
		stop := rep.stop
		if stop == "" {
			stop = "end_turn"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"text": rep.text}}}},
			"stopReason": stop,
			"usage":      map[string]any{"inputTokens": 120, "outputTokens": 30, "totalTokens": 150, "cacheReadInputTokens": 80, "cacheWriteInputTokens": 0},
			"metrics":    map[string]any{"latencyMs": 5},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

// client is the official SDK client pointed at the server, one attempt per call.
func (s *converseServer) client() *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func request() model.Request {
	img := &model.Image{Name: "0123456789abcdef", MimeType: "image/webp", Data: []byte("webp-bytes")}
	return model.Request{System: "sys", MaxTokens: 400, Messages: []model.Message{
		{Role: "user", Parts: []model.Part{
			{Text: "<chat>\n0+1|a\n</chat>", Prefix: true},
			{Text: "the task"},
			{Text: "[image 0123456789abcdef]"},
			{Image: img},
		}},
		{Role: "assistant", Parts: []model.Part{{Text: "too long reply"}}},
		{Role: "user", Parts: []model.Part{{Text: "too long: 700 bytes"}}},
	}}
}

func TestConverseRequestCarriesSystemTextAndImageBlocks(t *testing.T) {
	srv := newServer(t, reply{text: "the line"})
	m := New(srv.client(), "anthropic.claude-test-v1:0", Options{CachePoint: true})
	resp, err := m.Complete(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "the line" || resp.Usage.InputTokens != 120 || resp.Usage.OutputTokens != 30 || resp.Usage.CacheReadTokens != 80 {
		t.Fatalf("response = %+v", resp)
	}
	if got := srv.paths[0]; got != "POST /model/anthropic.claude-test-v1%3A0/converse" {
		t.Fatalf("path = %s", got)
	}
	req := srv.requests[0]
	if len(req.System) != 1 || *req.System[0].Text != "sys" || req.InferenceConfig.MaxTokens != 400 {
		t.Fatalf("system/inference = %+v", req)
	}
	if len(req.Messages) != 3 || req.Messages[0].Role != "user" || req.Messages[1].Role != "assistant" || req.Messages[2].Role != "user" {
		t.Fatalf("roles = %+v", req.Messages)
	}
	c := req.Messages[0].Content
	if len(c) != 5 {
		t.Fatalf("%d blocks, want view, cache point, task, label, image", len(c))
	}
	if *c[0].Text != "<chat>\n0+1|a\n</chat>" || c[1].CachePoint == nil || c[1].CachePoint.Type != "default" ||
		*c[2].Text != "the task" || *c[3].Text != "[image 0123456789abcdef]" {
		t.Fatalf("blocks = %+v", c)
	}
	if c[4].Image == nil || c[4].Image.Format != "webp" || c[4].Image.Source.Bytes != base64.StdEncoding.EncodeToString([]byte("webp-bytes")) {
		t.Fatalf("image block = %+v", c[4].Image)
	}
}

func TestNoCachePointUnlessAsked(t *testing.T) {
	srv := newServer(t, reply{text: "x"})
	if _, err := New(srv.client(), "m", Options{}).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	for _, b := range srv.requests[0].Messages[0].Content {
		if b.CachePoint != nil {
			t.Fatal("cache point sent to a model not known to support it")
		}
	}
}

func TestImageLimitsAndTextOnly(t *testing.T) {
	if c := New(nil, "m", Options{}).Capabilities(); !c.Images || c.MaxImages != 20 || c.MaxImageBytes != 3_750_000 {
		t.Fatalf("capabilities = %+v", c)
	}
	if c := New(nil, "m", Options{TextOnly: true}).Capabilities(); c.Images || c.MaxImages != 0 {
		t.Fatalf("text-only capabilities = %+v", c)
	}
	req := request()
	for i := 0; i < 20; i++ {
		req.Messages[0].Parts = append(req.Messages[0].Parts, model.Part{Image: &model.Image{Name: "x", MimeType: "image/png", Data: []byte{1}}})
	}
	srv := newServer(t, reply{text: "x"})
	_, err := New(srv.client(), "m", Options{}).Complete(context.Background(), req)
	if err == nil || model.IsRetryable(err) || len(srv.requests) != 0 {
		t.Fatalf("21 images: err %v, %d requests sent; want a non-retryable error and nothing sent", err, len(srv.requests))
	}
}

func TestConverseErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		reply     reply
		retryable bool
		refused   bool
	}{
		{"throttled", reply{status: 429, errorType: "ThrottlingException"}, true, false},
		{"model not ready", reply{status: 429, errorType: "ModelNotReadyException"}, true, false},
		{"model timeout", reply{status: 408, errorType: "ModelTimeoutException"}, true, false},
		{"internal error", reply{status: 500, errorType: "InternalServerException"}, true, false},
		{"unavailable", reply{status: 503, errorType: "ServiceUnavailableException"}, true, false},
		{"image rejected", reply{status: 400, errorType: "ValidationException"}, false, false},
		{"access denied", reply{status: 403, errorType: "AccessDeniedException"}, false, false},
		{"bad signature", reply{status: 403, errorType: "UnrecognizedClientException"}, false, false},
		{"no quota", reply{status: 400, errorType: "ServiceQuotaExceededException"}, false, false},
		{"dropped connection", reply{drop: true}, true, false},
		{"guardrail", reply{text: "blocked", stop: "guardrail_intervened"}, false, true},
		{"content filtered", reply{text: "", stop: "content_filtered"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.reply)
			_, err := New(srv.client(), "m", Options{}).Complete(context.Background(), request())
			if err == nil {
				t.Fatal("no error")
			}
			if got := model.IsRetryable(err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v (%v)", got, tt.retryable, err)
			}
			if got := model.IsRefused(err); got != tt.refused {
				t.Errorf("IsRefused = %v, want %v (%v)", got, tt.refused, err)
			}
		})
	}
}
