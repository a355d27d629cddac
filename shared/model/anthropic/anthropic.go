// Package anthropic adapts the Anthropic Messages API to model.Model, with
// prompt caching of the compaction view and prime-first calls.
package anthropic

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/durachat/durachat/shared/model"
)

// Limits of the Messages API for images.
const (
	MaxImages = 100
	// MaxImageBytes: the API takes 5 MB of base64 per image, which is 3.75 MB
	// of image.
	MaxImageBytes = 5 * 1024 * 1024 / 4 * 3
)

// Cache blocks: the prefix is cut into model.CacheBlocks of BlockLines
// lines, marked at the last whole block and MarkStride and 2*MarkStride
// blocks before it.
const (
	BlockLines = model.CacheBlockLines
	MarkStride = model.CacheMarkStride
	// maxMarks is the API's limit of cache breakpoints per request.
	maxMarks = 4
)

// Options tune a Model. The zero value is the default.
type Options struct {
	// PrimeWait bounds how long a call waits for another call priming the
	// same prefix: 0 means 30 s.
	PrimeWait time.Duration
	// CacheTTL is how long a primed prefix counts as cached after its last
	// use: 0 means 5 minutes, the API's default cache lifetime.
	CacheTTL time.Duration
	// Prefixes bounds how many prefixes are remembered: 0 means 1024.
	Prefixes int
}

// Model is one Anthropic model behind the official SDK client.
type Model struct {
	client *sdk.Client
	model  string
	primer *primer
}

var _ model.Model = (*Model)(nil)

// New returns a Model calling name through client (built with
// sdk.NewClient and the key, base URL and retry options the caller wants).
func New(client *sdk.Client, name string, opts Options) *Model {
	if opts.PrimeWait <= 0 {
		opts.PrimeWait = 30 * time.Second
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 5 * time.Minute
	}
	if opts.Prefixes <= 0 {
		opts.Prefixes = 1024
	}
	return &Model{client: client, model: name, primer: newPrimer(opts.Prefixes, opts.CacheTTL, opts.PrimeWait, time.Now)}
}

// Name is "anthropic:<model>".
func (m *Model) Name() string { return "anthropic:" + m.model }

// Capabilities: images, up to the API's limits.
func (m *Model) Capabilities() model.Capabilities {
	return model.Capabilities{Images: true, MaxImages: MaxImages, MaxImageBytes: MaxImageBytes}
}

// Complete sends req as one streamed Messages call. Streaming lets a
// call that primes the cache release the calls waiting on it as soon as
// the answer starts, when the prefix has been read and cached.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	params, cached := m.params(req)
	release := func(bool) {}
	if cached != "" {
		var err error
		release, err = m.primer.acquire(ctx, primeKey(m.model, req.System, cached))
		if err != nil {
			return model.Response{}, model.TransportError(err)
		}
	}
	msg, err := m.stream(ctx, params, release)
	release(err == nil)
	if err != nil {
		return model.Response{}, classify(err)
	}
	if msg.StopReason == sdk.StopReasonRefusal {
		return model.Response{}, model.RefusedError(fmt.Errorf("anthropic %s: %w", m.model, model.ErrRefused))
	}
	var text strings.Builder
	for _, block := range msg.Content {
		if block.Type == "text" {
			text.WriteString(block.Text)
		}
	}
	return model.Response{Text: text.String(), Usage: model.Usage{
		InputTokens:      int(msg.Usage.InputTokens),
		OutputTokens:     int(msg.Usage.OutputTokens),
		CacheReadTokens:  int(msg.Usage.CacheReadInputTokens),
		CacheWriteTokens: int(msg.Usage.CacheCreationInputTokens),
	}}, nil
}

// stream runs the call and calls started once the first event arrives.
func (m *Model) stream(ctx context.Context, params sdk.MessageNewParams, started func(bool)) (sdk.Message, error) {
	s := m.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg sdk.Message
	first := true
	for s.Next() {
		if first {
			first = false
			started(true)
		}
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, fmt.Errorf("anthropic %s: reading the answer: %w", m.model, err)
		}
	}
	if err := s.Err(); err != nil {
		return msg, fmt.Errorf("anthropic %s: %w", m.model, err)
	}
	if first {
		return msg, fmt.Errorf("anthropic %s: the answer ended before it started", m.model)
	}
	return msg, nil
}

// params translates a request. cached is the text up to the last cache
// mark ("" when nothing is marked): the prefix the cache is keyed on.
func (m *Model) params(req model.Request) (p sdk.MessageNewParams, cached string) {
	p = sdk.MessageNewParams{Model: sdk.Model(m.model), MaxTokens: int64(req.MaxTokens)}
	if p.MaxTokens <= 0 {
		p.MaxTokens = 1024
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	marks := 0
	for _, msg := range req.Messages {
		var blocks []sdk.ContentBlockParamUnion
		for _, part := range msg.Parts {
			switch {
			case part.Image != nil:
				blocks = append(blocks, sdk.NewImageBlockBase64(part.Image.MimeType, base64.StdEncoding.EncodeToString(part.Image.Data)))
			case part.Prefix:
				var b []sdk.ContentBlockParamUnion
				var c string
				b, c, marks = prefixBlocks(part.Text, marks)
				blocks = append(blocks, b...)
				if c != "" {
					cached += c
				}
			case part.Text != "":
				blocks = append(blocks, sdk.NewTextBlock(part.Text))
			}
		}
		if msg.Role == "assistant" {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		}
	}
	return p, cached
}

// prefixBlocks cuts text into model.CacheBlocks and marks them, within
// the API's limit on marks (used counts marks already placed). cached is
// the text up to the last mark.
func prefixBlocks(text string, used int) (blocks []sdk.ContentBlockParamUnion, cached string, marks int) {
	chunks := model.CacheBlocks(text)
	marked := model.CacheMarks(chunks, maxMarks-used, nil)
	keep := map[int]bool{}
	for _, b := range marked {
		keep[b] = true
	}
	last := -1
	if len(marked) > 0 {
		last = marked[0]
	}
	var upTo strings.Builder
	for i, c := range chunks {
		block := sdk.TextBlockParam{Text: c}
		if keep[i] {
			block.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfText: &block})
		if i <= last {
			upTo.WriteString(c)
		}
	}
	return blocks, upTo.String(), used + len(marked)
}

// classify maps an SDK error to a model error.
func classify(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Type() {
		case "overloaded_error", "rate_limit_error", "api_error", "timeout_error":
			// Also sent as an event in a stream that had answered 200.
			return &model.Error{Retryable: true, Status: apiErr.StatusCode, Err: err}
		}
		if apiErr.StatusCode >= 400 {
			return model.StatusError(apiErr.StatusCode, err)
		}
	}
	return model.Classify(err)
}
