package bedrock

import (
	"bytes"
	"context"
	"testing"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
)

func serve(t *testing.T, rep bedrocktest.Reply) *bedrocktest.Server {
	return bedrocktest.New(t, func(int, bedrocktest.Request) bedrocktest.Reply { return rep })
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
	srv := serve(t, bedrocktest.Reply{Text: "the line"})
	m := New(srv.Client(), "anthropic.claude-test-v1:0", Options{CachePoint: true})
	resp, err := m.Complete(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "the line" || resp.Usage.InputTokens != 120 || resp.Usage.OutputTokens != 30 || resp.Usage.CacheReadTokens != 80 {
		t.Fatalf("response = %+v", resp)
	}
	if got := srv.Requests()[0].Path; got != "/model/anthropic.claude-test-v1%3A0/converse" {
		t.Fatalf("path = %s", got)
	}
	req := srv.Requests()[0]
	if len(req.System) != 1 || *req.System[0].Text != "sys" || req.InferenceConfig.MaxTokens != 400 {
		t.Fatalf("system/inference = %+v", req)
	}
	if len(req.Messages) != 3 || req.Messages[0].Role != "user" || req.Messages[1].Role != "assistant" || req.Messages[2].Role != "user" {
		t.Fatalf("roles = %+v", req.Messages)
	}
	c := req.Messages[0].Content
	if len(c) != 4 {
		t.Fatalf("%d blocks, want view (too short for a cache point), task, label, image", len(c))
	}
	if *c[0].Text != "<chat>\n0+1|a\n</chat>" || *c[1].Text != "the task" || *c[2].Text != "[image 0123456789abcdef]" {
		t.Fatalf("blocks = %+v", c)
	}
	if c[3].Image == nil || c[3].Image.Format != "webp" || !bytes.Equal(c[3].Image.Source.Bytes, []byte("webp-bytes")) {
		t.Fatalf("image block = %+v", c[3].Image)
	}
}

func TestNoCachePointUnlessAsked(t *testing.T) {
	srv := serve(t, bedrocktest.Reply{Text: "x"})
	if _, err := New(srv.Client(), "m", Options{}).Complete(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	for _, b := range srv.Requests()[0].Messages[0].Content {
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
	srv := serve(t, bedrocktest.Reply{Text: "x"})
	_, err := New(srv.Client(), "m", Options{}).Complete(context.Background(), req)
	if err == nil || model.IsRetryable(err) || len(srv.Requests()) != 0 {
		t.Fatalf("21 images: err %v, %d requests sent; want a non-retryable error and nothing sent", err, len(srv.Requests()))
	}
}

func TestConverseErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		reply     bedrocktest.Reply
		retryable bool
		refused   bool
	}{
		{"throttled", bedrocktest.Reply{Status: 429, ErrorType: "ThrottlingException"}, true, false},
		{"model not ready", bedrocktest.Reply{Status: 429, ErrorType: "ModelNotReadyException"}, true, false},
		{"model timeout", bedrocktest.Reply{Status: 408, ErrorType: "ModelTimeoutException"}, true, false},
		{"internal error", bedrocktest.Reply{Status: 500, ErrorType: "InternalServerException"}, true, false},
		{"unavailable", bedrocktest.Reply{Status: 503, ErrorType: "ServiceUnavailableException"}, true, false},
		{"image rejected", bedrocktest.Reply{Status: 400, ErrorType: "ValidationException"}, false, false},
		{"access denied", bedrocktest.Reply{Status: 403, ErrorType: "AccessDeniedException"}, false, false},
		{"bad signature", bedrocktest.Reply{Status: 403, ErrorType: "UnrecognizedClientException"}, false, false},
		{"no quota", bedrocktest.Reply{Status: 400, ErrorType: "ServiceQuotaExceededException"}, false, false},
		{"dropped connection", bedrocktest.Reply{Drop: true}, true, false},
		{"guardrail", bedrocktest.Reply{Text: "blocked", StopReason: "guardrail_intervened"}, false, true},
		{"content filtered", bedrocktest.Reply{StopReason: "content_filtered"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.reply)
			_, err := New(srv.Client(), "m", Options{}).Complete(context.Background(), request())
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
