package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/durachat/durachat/client/wire"
)

// The hooks are idempotent (an image is stored once under its name), so a
// 503 is retried on each of them.

// Call names the tool call a result answers. Nested marks a call issued by
// another tool rather than by the model: its result passes untouched.
type Call struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Nested bool   `json:"nested,omitempty"`
}

// Bounds is the host's bound on tool output; zero fields keep the defaults
// (51,200 bytes, 2,000 lines).
type Bounds struct {
	MaxBytes int `json:"maxBytes,omitempty"`
	MaxLines int `json:"maxLines,omitempty"`
}

// AfterToolInput is a tool result for after-tool.
type AfterToolInput struct {
	Call   Call       `json:"call"`
	Result ToolResult `json:"result"`
	Bounds *Bounds    `json:"bounds,omitempty"`
}

// InlineImage is an image a hook kept inline: the index of its block and
// why ("unavailable" when the store was down, else "error").
type InlineImage struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// AfterToolResult is after-tool's answer.
type AfterToolResult struct {
	// Result is the tool result to keep, with refs in place of the
	// stored images.
	Result ToolResult `json:"result"`
	// Stored lists the names of the result's refs, in block order.
	Stored []string      `json:"stored"`
	Inline []InlineImage `json:"inline"`
	// Skipped is "" when the result was processed, "nested" or "bound"
	// when it passed untouched.
	Skipped string `json:"skipped"`
}

// AfterTool turns the images of a tool result into refs (POST
// .../hooks/after-tool). Call it on each result before keeping, bounding or
// logging it.
//
// When the body would pass the client's body limit (WithBodyLimit), the
// result's images are uploaded first (Upload) and sent as refs; their
// names are in Stored like those the hook stored.
func (ch *Chat) AfterTool(ctx context.Context, in AfterToolInput) (*AfterToolResult, error) {
	var uploaded []string
	if !in.Call.Nested {
		in.Result.Content = slices.Clone(in.Result.Content)
		var err error
		if uploaded, err = ch.uploadIfOver(ctx, in, in.Result.Content); err != nil {
			return nil, err
		}
	}
	var out AfterToolResult
	if err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/hooks/after-tool"), body: in, retry: true}, &out); err != nil {
		return nil, err
	}
	out.Stored = withNames(out.Stored, uploaded)
	return &out, nil
}

// withNames adds the names stored missing, each once.
func withNames(stored, names []string) []string {
	for _, n := range names {
		if !slices.Contains(stored, n) {
			stored = append(stored, n)
		}
	}
	return stored
}

// OffloadInputResult is offload-input's answer.
type OffloadInputResult struct {
	Message Message       `json:"message"`
	Stored  []string      `json:"stored"`
	Inline  []InlineImage `json:"inline"`
}

// OffloadInput turns the images of a user message into refs (POST
// .../hooks/offload-input), for a host that keeps its own transcript: call
// it before keeping or logging the message.
// Past the client's body limit, its images are uploaded first, as for
// AfterTool.
func (ch *Chat) OffloadInput(ctx context.Context, msg Message) (*OffloadInputResult, error) {
	var out OffloadInputResult
	msg.Content = slices.Clone(msg.Content)
	body := struct {
		Message Message `json:"message"`
	}{msg}
	uploaded, err := ch.uploadIfOver(ctx, body, body.Message.Content)
	if err != nil {
		return nil, err
	}
	if err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/hooks/offload-input"), body: body, retry: true}, &out); err != nil {
		return nil, err
	}
	out.Stored = withNames(out.Stored, uploaded)
	return &out, nil
}

// Format is the provider format of a request for before-request.
type Format string

const (
	FormatPi        Format = "pi"        // pi-ai context: PiContext
	FormatAnthropic Format = "anthropic" // Anthropic Messages API body
	FormatBedrock   Format = "bedrock"   // Amazon Bedrock Converse request
	FormatOpenAI    Format = "openai"    // OpenAI Chat Completions body
)

// Mode is how before-request puts the images back.
type Mode string

const (
	// ModeInline inlines images within the budget, links past it (the default).
	ModeInline Mode = "inline"
	// ModeURL sends every image as a short-lived link where the format
	// takes links.
	ModeURL Mode = "url"
	// ModeDescribe sends every image as its ref with the image's
	// description, for models that take no images.
	ModeDescribe Mode = "describe"
)

// BeforeRequestInput is a provider request for before-request.
type BeforeRequestInput struct {
	Format Format `json:"format"`
	// Request is the provider's request body: a value that encodes to it
	// (an SDK's params, a PiContext, a map) or a json.RawMessage.
	Request any  `json:"request"`
	Mode    Mode `json:"mode,omitempty"`
	// BudgetBytes bounds the base64 inlined (0: the server's default).
	BudgetBytes int64 `json:"budgetBytes,omitempty"`
}

// BeforeRequestResult is before-request's answer.
type BeforeRequestResult struct {
	// Request is the request to send, in its format, with the images back.
	Request json.RawMessage `json:"request"`
	// Restoration says what was restored, what was left as text and why,
	// and what the images cost.
	wire.Restoration
}

// Decode decodes the restored request into v (such as a *PiContext).
func (r *BeforeRequestResult) Decode(v any) error {
	if err := json.Unmarshal(r.Request, v); err != nil {
		return fmt.Errorf("durachat: decoding the restored request: %w", err)
	}
	return nil
}

// BeforeRequest puts the images back into a provider request just before
// it is sent (POST .../hooks/before-request): in user messages and tool
// results, each exact ref block becomes an image of the request's format.
// It never fails a well-formed request; refs it could not restore are
// listed in Unrestored.
func (ch *Chat) BeforeRequest(ctx context.Context, in BeforeRequestInput) (*BeforeRequestResult, error) {
	var out BeforeRequestResult
	if err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/hooks/before-request"), body: in, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PiContext is a pi-ai context, the request of FormatPi.
type PiContext struct {
	SystemPrompt string    `json:"systemPrompt,omitempty"`
	Messages     []Message `json:"messages"`
	Tools        []ToolDef `json:"tools,omitempty"`
}
