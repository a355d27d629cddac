// Package model is the contract between the compactor and a language model
// provider. Adapters (Bedrock, Anthropic, OpenAI-compatible, offline) live in
// subpackages and translate a Request into their provider's API.
package model

import (
	"context"
	"errors"

	"github.com/durachat/durachat/shared/images"
)

// Image is an image sent to the model, already downscaled; Name is the
// image name its [image <name>] label carries.
type Image = images.Image

// Part is one piece of a message: text, or an image. Prefix marks the
// cacheable context block (the compaction view's <chat> block); adapters
// that support prompt caching mark it, Anthropic in 4-line blocks.
type Part struct {
	Text   string
	Image  *Image
	Prefix bool
}

// Message is one turn of the conversation with the model.
type Message struct {
	Role  string // "user" or "assistant"
	Parts []Part
}

// Request is one call.
type Request struct {
	System    string
	Messages  []Message
	MaxTokens int
}

// Usage counts tokens as the provider reports them.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
}

// Response is the model's text answer.
type Response struct {
	Text  string
	Usage Usage
}

// Capabilities say what a model accepts.
type Capabilities struct {
	// Images: whether image parts may be sent at all.
	Images bool
	// MaxImages per request; 0 means no images.
	MaxImages int
	// MaxImageBytes per image, decoded; 0 means no limit of its own.
	MaxImageBytes int
}

// Model is one provider and model.
type Model interface {
	// Name is "<provider>:<model>", for logs and status.
	Name() string
	Capabilities() Capabilities
	Complete(ctx context.Context, req Request) (Response, error)
}

// Error is a failed call, classified so the caller can branch on it.
type Error struct {
	// Retryable: throttling, 5xx, timeouts, dropped connections.
	Retryable bool
	// Refused: the model answered but declined the content (a safety refusal).
	Refused bool
	// Status is the provider's HTTP status, when there was one.
	Status int
	Err    error
}

func (e *Error) Error() string {
	kind := "non-retryable"
	if e.Retryable {
		kind = "retryable"
	}
	if e.Refused {
		kind = "refused"
	}
	return "model: " + kind + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth trying again later unchanged.
// Errors that are not model errors (context deadlines, network) count as
// retryable; a classified non-retryable error does not.
func IsRetryable(err error) bool {
	var me *Error
	if errors.As(err, &me) {
		return me.Retryable
	}
	return err != nil
}

// IsRefused reports whether the model declined the content.
func IsRefused(err error) bool {
	var me *Error
	return errors.As(err, &me) && me.Refused
}
