package openai

import (
	"context"
	"encoding/base64"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/openai/openaitest"
)

func newServer(t *testing.T, rep openaitest.Reply) (*sdk.Client, *openaitest.Server) {
	srv := openaitest.New(t, func(int, openaitest.Request) openaitest.Reply { return rep })
	return srv.Client(), srv
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
	client, srv := newServer(t, openaitest.Reply{Text: "the line"})
	resp, err := New(client, "gpt-test", Options{}).Complete(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "the line" || resp.Usage.InputTokens != 90 || resp.Usage.OutputTokens != 12 || resp.Usage.CacheReadTokens != 64 {
		t.Fatalf("response = %+v", resp)
	}
	req := srv.Requests()[0]
	if req.Model != "gpt-test" || req.MaxCompletionTokens != 500 || req.MaxTokens != 0 {
		t.Fatalf("model/tokens = %+v", req)
	}
	if len(req.Messages) != 4 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" ||
		req.Messages[2].Role != "assistant" || req.Messages[3].Role != "user" {
		t.Fatalf("messages = %+v", req.Messages)
	}
	parts := req.Messages[1].Parts
	want := "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString([]byte("jpeg"))
	if len(parts) != 4 || parts[0].Text != "<chat>\n</chat>" || parts[1].Text != "the task" ||
		parts[2].Text != "[image 0123456789abcdef]" || parts[3].Type != "image_url" || parts[3].ImageURL.URL != want {
		t.Fatalf("parts = %+v", parts)
	}
}

func TestLegacyMaxTokensForOlderServers(t *testing.T) {
	client, srv := newServer(t, openaitest.Reply{Text: "x"})
	if _, err := New(client, "local", Options{LegacyMaxTokens: true}).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; r.MaxTokens != 500 || r.MaxCompletionTokens != 0 {
		t.Fatalf("tokens = %+v", r)
	}
}

func TestChatCompletionsErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		reply     openaitest.Reply
		retryable bool
		refused   bool
	}{
		{"rate limited", openaitest.Reply{Status: 429, Code: "rate_limit_exceeded"}, true, false},
		{"no quota", openaitest.Reply{Status: 429, Code: "insufficient_quota"}, false, false},
		{"server error", openaitest.Reply{Status: 500}, true, false},
		{"bad gateway", openaitest.Reply{Status: 502}, true, false},
		{"image rejected", openaitest.Reply{Status: 400, Code: "invalid_image_format"}, false, false},
		{"bad key", openaitest.Reply{Status: 401, Code: "invalid_api_key"}, false, false},
		{"forbidden", openaitest.Reply{Status: 403}, false, false},
		{"dropped connection", openaitest.Reply{Drop: true}, true, false},
		{"content filter", openaitest.Reply{FinishReason: "content_filter"}, false, true},
		{"refusal", openaitest.Reply{Refusal: "I can't help with that."}, false, true},
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
