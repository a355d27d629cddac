package openai

import (
	"context"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
)

// Embedder is an OpenAI-compatible embeddings endpoint (POST
// /v1/embeddings) behind the official SDK client: OpenAI itself, or a
// local server speaking the same API, which may need no key.
type Embedder struct {
	client *sdk.Client
	model  string
}

// NewEmbedder returns an Embedder calling model through client (built with
// sdk.NewClient and the key and base URL the caller wants).
func NewEmbedder(client *sdk.Client, model string) *Embedder {
	return &Embedder{client: client, model: model}
}

// Name is "openai:<model>".
func (e *Embedder) Name() string { return "openai:" + e.model }

// Embed sends texts as one embeddings call and returns their vectors in
// the order of texts, whatever the order of the answer.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	resp, err := e.client.Embeddings.New(ctx, sdk.EmbeddingNewParams{
		Model:          e.model,
		Input:          sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat,
	})
	if err != nil {
		return nil, classify(fmt.Errorf("openai embeddings %s: %w", e.model, err))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= int64(len(texts)) || out[d.Index] != nil {
			return nil, fmt.Errorf("openai embeddings %s: an answer of index %d for %d texts", e.model, d.Index, len(texts))
		}
		v := make([]float32, len(d.Embedding))
		for k, x := range d.Embedding {
			v[k] = float32(x)
		}
		out[d.Index] = v
	}
	for k, v := range out {
		if v == nil {
			return nil, fmt.Errorf("openai embeddings %s: no vector for text %d of %d", e.model, k, len(texts))
		}
	}
	return out, nil
}
