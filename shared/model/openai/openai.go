// Package openai adapts an OpenAI-compatible Chat Completions endpoint to
// model.Model: OpenAI itself, or a local model server speaking the same API.
package openai

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/durachat/durachat/shared/model"
)

// Default image limits; a local server may take fewer (Options).
const (
	DefaultMaxImages     = 10
	DefaultMaxImageBytes = 20 * 1024 * 1024
)

// Options tune a Model. The zero value is the default.
type Options struct {
	// TextOnly: the model takes no image input.
	TextOnly bool
	// MaxImages per request: 0 means 10.
	MaxImages int
	// MaxImageBytes per image: 0 means 20 MiB.
	MaxImageBytes int
	// LegacyMaxTokens sends max_tokens instead of max_completion_tokens, for
	// servers that only know the older field.
	LegacyMaxTokens bool
}

// Model is one chat model behind the official SDK client.
type Model struct {
	client *sdk.Client
	model  string
	opts   Options
}

var _ model.Model = (*Model)(nil)

// New returns a Model calling name through client (built with
// sdk.NewClient and the key and base URL the caller wants).
func New(client *sdk.Client, name string, opts Options) *Model {
	if opts.MaxImages <= 0 {
		opts.MaxImages = DefaultMaxImages
	}
	if opts.MaxImageBytes <= 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	return &Model{client: client, model: name, opts: opts}
}

// Name is "openai:<model>".
func (m *Model) Name() string { return "openai:" + m.model }

// Capabilities: images unless TextOnly.
func (m *Model) Capabilities() model.Capabilities {
	if m.opts.TextOnly {
		return model.Capabilities{}
	}
	return model.Capabilities{Images: true, MaxImages: m.opts.MaxImages, MaxImageBytes: m.opts.MaxImageBytes}
}

// Complete sends req as one Chat Completions call.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := m.client.Chat.Completions.New(ctx, m.params(req))
	if err != nil {
		return model.Response{}, classify(fmt.Errorf("openai %s: %w", m.model, err))
	}
	if len(resp.Choices) == 0 {
		return model.Response{}, model.TransportError(fmt.Errorf("openai %s: the answer has no choices", m.model))
	}
	choice := resp.Choices[0]
	if choice.FinishReason == "content_filter" || choice.Message.Refusal != "" {
		return model.Response{}, model.RefusedError(fmt.Errorf("openai %s: %w", m.model, model.ErrRefused))
	}
	u := resp.Usage
	return model.Response{Text: choice.Message.Content, Usage: model.Usage{
		InputTokens:      int(u.PromptTokens),
		OutputTokens:     int(u.CompletionTokens),
		CacheReadTokens:  int(u.PromptTokensDetails.CachedTokens),
		CacheWriteTokens: int(u.PromptTokensDetails.CacheWriteTokens),
	}}, nil
}

func (m *Model) params(req model.Request) sdk.ChatCompletionNewParams {
	p := sdk.ChatCompletionNewParams{Model: m.model}
	if req.MaxTokens > 0 {
		if m.opts.LegacyMaxTokens {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			var text string
			for _, part := range msg.Parts {
				text += part.Text
			}
			p.Messages = append(p.Messages, sdk.AssistantMessage(text))
			continue
		}
		var parts []sdk.ChatCompletionContentPartUnionParam
		for _, part := range msg.Parts {
			switch {
			case part.Image != nil:
				url := "data:" + part.Image.MimeType + ";base64," + base64.StdEncoding.EncodeToString(part.Image.Data)
				parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: url}))
			case part.Text != "":
				// The prefix goes first as its own part: OpenAI caches the
				// longest repeated prefix on its own, no marks needed.
				parts = append(parts, sdk.TextContentPart(part.Text))
			}
		}
		p.Messages = append(p.Messages, sdk.UserMessage(parts))
	}
	return p
}

// classify maps an SDK error to a model error by HTTP status; an error
// without one (a dropped connection, a timeout) is retryable.
func classify(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode != 0 {
		if apiErr.StatusCode == 429 && apiErr.Code == "insufficient_quota" {
			// No quota left is not throttling: the same call fails until
			// someone pays.
			return &model.Error{Status: 429, Err: err}
		}
		return model.StatusError(apiErr.StatusCode, err)
	}
	return model.Classify(err)
}
