package bedrock

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// TitanEmbedV2 is Amazon Titan Text Embeddings V2, the embedding model the
// stack calls.
const TitanEmbedV2 = "amazon.titan-embed-text-v2:0"

// TitanDims is the vector length asked of Titan V2 (256, 512 or 1,024):
// 512 keeps nearly all of 1,024's retrieval quality at half the bytes
// stored and read.
const TitanDims = 512

// Invoker is the part of the Bedrock runtime client the embedder uses.
type Invoker interface {
	InvokeModel(ctx context.Context, in *bedrockruntime.InvokeModelInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.InvokeModelOutput, error)
}

// Embedder is a Titan Text Embeddings model behind the official SDK
// client's InvokeModel: one call a text, as the model takes.
type Embedder struct {
	client  Invoker
	modelID string
}

// NewEmbedder returns an Embedder calling modelID through client.
func NewEmbedder(client Invoker, modelID string) *Embedder {
	return &Embedder{client: client, modelID: modelID}
}

// Name is "bedrock:<model-id>".
func (e *Embedder) Name() string { return "bedrock:" + e.modelID }

type titanRequest struct {
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions"`
	Normalize  bool   `json:"normalize"`
}

type titanResponse struct {
	Embedding []float32 `json:"embedding"`
}

// Embed embeds each text with a call of its own, in order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for k, text := range texts {
		body, err := json.Marshal(titanRequest{InputText: text, Dimensions: TitanDims, Normalize: true})
		if err != nil {
			return nil, err
		}
		resp, err := e.client.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{
			ModelId: aws.String(e.modelID), Body: body,
			ContentType: aws.String("application/json"), Accept: aws.String("application/json"),
		})
		if err != nil {
			return nil, classify(fmt.Errorf("bedrock %s: %w", e.modelID, err))
		}
		var r titanResponse
		if err := json.Unmarshal(resp.Body, &r); err != nil || len(r.Embedding) == 0 {
			return nil, fmt.Errorf("bedrock %s: an answer without an embedding: %v", e.modelID, err)
		}
		out[k] = r.Embedding
	}
	return out, nil
}
