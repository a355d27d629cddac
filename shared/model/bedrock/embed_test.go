package bedrock_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/bedrock"
)

// titanServer speaks InvokeModel of Titan Text Embeddings V2 on the
// Bedrock runtime's wire: a signed POST /model/{modelId}/invoke with the
// request as its JSON body. A text's vector is [its length, dimensions];
// a text "down" is answered with a throttling error.
func titanServer(t *testing.T) *bedrockruntime.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/model/"+bedrock.TitanEmbedV2+"/invoke" ||
			!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
			return
		}
		var req struct {
			InputText  string `json:"inputText"`
			Dimensions int    `json:"dimensions"`
			Normalize  bool   `json:"normalize"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Normalize {
			w.Header().Set("X-Amzn-Errortype", "ValidationException")
			http.Error(w, `{"message":"bad body"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.InputText == "down" {
			w.Header().Set("X-Amzn-Errortype", "ThrottlingException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"Too many requests"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"embedding": []float64{float64(len(req.InputText)), float64(req.Dimensions)}, "inputTextTokenCount": 1})
	}))
	t.Cleanup(srv.Close)
	return bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		Retryer:     aws.NopRetryer{},
	})
}

func TestTitanEmbedderInvokesTheModelOnceATextInOrder(t *testing.T) {
	e := bedrock.NewEmbedder(titanServer(t), bedrock.TitanEmbedV2)
	vecs, err := e.Embed(t.Context(), []string{"ab", "abcd"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 2 || !slices.Equal(vecs[0], []float32{2, bedrock.TitanDims}) || !slices.Equal(vecs[1], []float32{4, bedrock.TitanDims}) {
		t.Fatalf("vectors %v", vecs)
	}
	if e.Name() != "bedrock:"+bedrock.TitanEmbedV2 {
		t.Errorf("Name() = %q", e.Name())
	}
}

func TestTitanThrottlingIsARetryableModelError(t *testing.T) {
	_, err := bedrock.NewEmbedder(titanServer(t), bedrock.TitanEmbedV2).Embed(t.Context(), []string{"up", "down"})
	if err == nil || !model.IsRetryable(err) {
		t.Fatalf("throttling is %v, want a retryable model error", err)
	}
}
