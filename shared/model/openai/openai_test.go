package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/durachat/durachat/shared/model"
)

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireRequest struct {
	Model               string        `json:"model"`
	Messages            []wireMessage `json:"messages"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`
	MaxTokens           int           `json:"max_tokens"`
}

type reply struct {
	status  int
	code    string
	drop    bool
	text    string
	finish  string
	refusal string
}

// newServer speaks Chat Completions at /v1/chat/completions and keeps the
// requests it got.
func newServer(t *testing.T, rep reply) (*sdk.Client, *[]wireRequest) {
	var got []wireRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
		if r.Header.Get("Authorization") != "Bearer test-key" {
			t.Errorf("authorization = %q", r.Header.Get("Authorization"))
		}
		body, _ := io.ReadAll(r.Body)
		var req wireRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("body: %v", err)
		}
		got = append(got, req)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case rep.drop:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case rep.status != 0:
			w.WriteHeader(rep.status)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "scripted", "type": "x", "code": rep.code}})
			return
		}
		finish := rep.finish
		if finish == "" {
			finish = "stop"
		}
		var refusal any
		if rep.refusal != "" {
			refusal = rep.refusal
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "c1", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
				"message": map[string]any{"role": "assistant", "content": rep.text, "refusal": refusal}}},
			"usage": map[string]any{"prompt_tokens": 90, "completion_tokens": 12, "total_tokens": 102,
				"prompt_tokens_details": map[string]any{"cached_tokens": 64}},
		})
	}))
	t.Cleanup(srv.Close)
	c := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	return &c, &got
}

func request() model.Request {
	return model.Request{System: "sys", MaxTokens: 500, Messages: []model.Message{
		{Role: "user", Parts: []model.Part{
			{Text: "<chat>\n</chat>", Prefix: true},
			{Text: "the task"},
			{Text: "[image 0123456789abcdef]"},
			{Image: &model.Image{Name: "0123456789abcdef", MimeType: "image/jpeg", Data: []byte("jpeg")}},
		}},
		{Role: "assistant", Parts: []model.Part{{Text: "long"}}},
		{Role: "user", Parts: []model.Part{{Text: "too long"}}},
	}}
}

func TestChatCompletionsRequestCarriesImagesAsDataURLs(t *testing.T) {
	client, got := newServer(t, reply{text: "the line"})
	resp, err := New(client, "gpt-test", Options{}).Complete(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "the line" || resp.Usage.InputTokens != 90 || resp.Usage.OutputTokens != 12 || resp.Usage.CacheReadTokens != 64 {
		t.Fatalf("response = %+v", resp)
	}
	req := (*got)[0]
	if req.Model != "gpt-test" || req.MaxCompletionTokens != 500 || req.MaxTokens != 0 {
		t.Fatalf("model/tokens = %+v", req)
	}
	if len(req.Messages) != 4 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" ||
		req.Messages[2].Role != "assistant" || req.Messages[3].Role != "user" {
		t.Fatalf("messages = %+v", req.Messages)
	}
	var parts []wirePart
	if err := json.Unmarshal(req.Messages[1].Content, &parts); err != nil {
		t.Fatal(err)
	}
	want := "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString([]byte("jpeg"))
	if len(parts) != 4 || parts[0].Text != "<chat>\n</chat>" || parts[1].Text != "the task" ||
		parts[2].Text != "[image 0123456789abcdef]" || parts[3].Type != "image_url" || parts[3].ImageURL.URL != want {
		t.Fatalf("parts = %+v", parts)
	}
}

func TestLegacyMaxTokensForOlderServers(t *testing.T) {
	client, got := newServer(t, reply{text: "x"})
	if _, err := New(client, "local", Options{LegacyMaxTokens: true}).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	if r := (*got)[0]; r.MaxTokens != 500 || r.MaxCompletionTokens != 0 {
		t.Fatalf("tokens = %+v", r)
	}
}

func TestChatCompletionsErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		reply     reply
		retryable bool
		refused   bool
	}{
		{"rate limited", reply{status: 429, code: "rate_limit_exceeded"}, true, false},
		{"no quota", reply{status: 429, code: "insufficient_quota"}, false, false},
		{"server error", reply{status: 500}, true, false},
		{"bad gateway", reply{status: 502}, true, false},
		{"image rejected", reply{status: 400, code: "invalid_image_format"}, false, false},
		{"bad key", reply{status: 401, code: "invalid_api_key"}, false, false},
		{"forbidden", reply{status: 403}, false, false},
		{"dropped connection", reply{drop: true}, true, false},
		{"content filter", reply{text: "", finish: "content_filter"}, false, true},
		{"refusal", reply{refusal: "I can't help with that."}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := newServer(t, tt.reply)
			_, err := New(client, "gpt-test", Options{}).Complete(context.Background(), request())
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
