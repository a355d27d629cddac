// Package bedrock adapts the Amazon Bedrock Converse API to model.Model.
package bedrock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/durachat/durachat/shared/model"
)

// Limits of Converse for images.
const (
	MaxImages     = 20        // per message
	MaxImageBytes = 3_750_000 // 3.75 MB per image
	maxCachePoint = 4         // cache points per request
	defaultTokens = 1024      // when the request sets none
)

// Options tune a Model.
type Options struct {
	// TextOnly: the model takes no image input.
	TextOnly bool
	// CachePoint marks the cacheable prefix with cache points, for models
	// that support prompt caching on Bedrock (Claude, Nova). Others reject
	// them. The prefix is cut into model.CacheBlocks, as the Anthropic
	// adapter does, and a cache point follows each marked block.
	CachePoint bool
	// MinCacheTokens is the model's minimum of tokens per cache checkpoint:
	// a mark is placed only where the prompt before it, and since the
	// previous mark, reaches it (a shorter one is not cached, so a mark
	// there is wasted). 0 means MinCacheTokens(model id).
	MinCacheTokens int
}

// bytesPerToken estimates tokens from bytes for the cache minimum. English
// text runs about 4 bytes a token; the view's labels and digits run fewer,
// which only makes the estimate safer.
const bytesPerToken = 4

// MinCacheTokens is Bedrock's minimum of tokens per cache checkpoint for
// the model: 4,096 for Claude Haiku 4.5 and Opus 4.5, 2,048 for the Claude
// 3.x Haikus, else 1,024 (Claude Sonnet and Opus 4, Nova).
func MinCacheTokens(modelID string) int {
	switch {
	case strings.Contains(modelID, "claude-haiku-4-5"), strings.Contains(modelID, "claude-opus-4-5"):
		return 4096
	case strings.Contains(modelID, "claude-3-5-haiku"), strings.Contains(modelID, "claude-3-haiku"):
		return 2048
	}
	return 1024
}

// Converser is the part of the Bedrock runtime client the adapter uses.
type Converser interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

// Model is one Bedrock model behind the official SDK client.
type Model struct {
	client  Converser
	modelID string
	opts    Options
}

var _ model.Model = (*Model)(nil)

// New returns a Model calling modelID (a model or inference profile id)
// through client.
func New(client Converser, modelID string, opts Options) *Model {
	if opts.MinCacheTokens <= 0 {
		opts.MinCacheTokens = MinCacheTokens(modelID)
	}
	return &Model{client: client, modelID: modelID, opts: opts}
}

// Name is "bedrock:<model-id>".
func (m *Model) Name() string { return "bedrock:" + m.modelID }

// Capabilities: images up to Converse's limits, unless TextOnly.
func (m *Model) Capabilities() model.Capabilities {
	if m.opts.TextOnly {
		return model.Capabilities{}
	}
	return model.Capabilities{Images: true, MaxImages: MaxImages, MaxImageBytes: MaxImageBytes}
}

// Complete sends req as one Converse call.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	in, err := m.input(req)
	if err != nil {
		return model.Response{}, err
	}
	out, err := m.client.Converse(ctx, in)
	if err != nil {
		return model.Response{}, classify(fmt.Errorf("bedrock %s: %w", m.modelID, err))
	}
	switch out.StopReason {
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return model.Response{}, model.RefusedError(fmt.Errorf("bedrock %s: %s: %w", m.modelID, out.StopReason, model.ErrRefused))
	}
	var text strings.Builder
	if msg, ok := out.Output.(*types.ConverseOutputMemberMessage); ok {
		for _, block := range msg.Value.Content {
			if t, ok := block.(*types.ContentBlockMemberText); ok {
				text.WriteString(t.Value)
			}
		}
	}
	var usage model.Usage
	if u := out.Usage; u != nil {
		usage = model.Usage{
			InputTokens:      int(aws.ToInt32(u.InputTokens)),
			OutputTokens:     int(aws.ToInt32(u.OutputTokens)),
			CacheReadTokens:  int(aws.ToInt32(u.CacheReadInputTokens)),
			CacheWriteTokens: int(aws.ToInt32(u.CacheWriteInputTokens)),
		}
	}
	return model.Response{Text: text.String(), Usage: usage}, nil
}

func (m *Model) input(req model.Request) (*bedrockruntime.ConverseInput, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultTokens
	}
	in := &bedrockruntime.ConverseInput{
		ModelId:         aws.String(m.modelID),
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(int32(maxTokens))},
	}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	points := 0
	before := len(req.System) // bytes of the prompt before the current part
	for _, msg := range req.Messages {
		var blocks []types.ContentBlock
		images := 0
		for _, part := range msg.Parts {
			switch {
			case part.Image != nil:
				format, ok := imageFormat(part.Image.MimeType)
				if !ok {
					return nil, &model.Error{Err: fmt.Errorf("bedrock %s: image %s: format %q not accepted", m.modelID, part.Image.Name, part.Image.MimeType)}
				}
				if images++; images > MaxImages {
					return nil, &model.Error{Err: fmt.Errorf("bedrock %s: more than %d images in one message", m.modelID, MaxImages)}
				}
				blocks = append(blocks, &types.ContentBlockMemberImage{Value: types.ImageBlock{
					Format: format,
					Source: &types.ImageSourceMemberBytes{Value: part.Image.Data},
				}})
			case part.Prefix && m.opts.CachePoint:
				var b []types.ContentBlock
				b, points = m.prefixBlocks(part.Text, before, points)
				blocks = append(blocks, b...)
			case part.Text != "":
				blocks = append(blocks, &types.ContentBlockMemberText{Value: part.Text})
			}
			before += len(part.Text)
		}
		role := types.ConversationRoleUser
		if msg.Role == "assistant" {
			role = types.ConversationRoleAssistant
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	return in, nil
}

// prefixBlocks cuts the cacheable prefix into model.CacheBlocks, one text
// block each, with a cache point after each marked block: within the
// request's limit of cache points (used so far), and only where the prompt
// up to it, and since the next mark nearer the end, holds MinCacheTokens
// (estimated). before is the prompt's bytes ahead of text.
func (m *Model) prefixBlocks(text string, before, used int) ([]types.ContentBlock, int) {
	chunks := model.CacheBlocks(text)
	ends := make([]int, len(chunks)) // the prompt's bytes through each block
	for i, c := range chunks {
		before += len(c)
		ends[i] = before
	}
	minBytes := m.opts.MinCacheTokens * bytesPerToken
	marked := model.CacheMarks(chunks, maxCachePoint-used, func(b, next int) bool {
		return ends[b] >= minBytes && (next < 0 || ends[next]-ends[b] >= minBytes)
	})
	mark := map[int]bool{}
	for _, b := range marked {
		mark[b] = true
	}
	blocks := make([]types.ContentBlock, 0, len(chunks)+len(marked))
	for i, c := range chunks {
		blocks = append(blocks, &types.ContentBlockMemberText{Value: c})
		if mark[i] {
			blocks = append(blocks, &types.ContentBlockMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointTypeDefault}})
		}
	}
	return blocks, used + len(marked)
}

func imageFormat(mimeType string) (types.ImageFormat, bool) {
	switch mimeType {
	case "image/png":
		return types.ImageFormatPng, true
	case "image/jpeg":
		return types.ImageFormatJpeg, true
	case "image/gif":
		return types.ImageFormatGif, true
	case "image/webp":
		return types.ImageFormatWebp, true
	}
	return "", false
}

// classify maps an SDK error to a model error: throttling, timeouts,
// models not ready and server errors are retryable; validation (a rejected
// image), access and quota errors are not. No HTTP answer at all (a
// dropped connection) is retryable.
func classify(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "ThrottlingException", "ModelTimeoutException", "ModelNotReadyException",
			"ServiceUnavailableException", "InternalServerException":
			return &model.Error{Retryable: true, Status: status(err), Err: err}
		}
	}
	if s := status(err); s != 0 {
		return model.StatusError(s, err)
	}
	return model.Classify(err)
}

func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
