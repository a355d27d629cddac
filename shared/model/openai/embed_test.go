package openai_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/openai"
)

// embeddingsServer speaks POST /v1/embeddings as OpenAI does: each input's
// vector is [its length, its index], answered in reverse order; status,
// when set, is the answer instead.
func embeddingsServer(t *testing.T, status int, got *[]string) *sdk.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model          string   `json:"model"`
			Input          []string `json:"input"`
			EncodingFormat string   `json:"encoding_format"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "nomic-embed-text" || req.EncodingFormat != "float" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		*got = req.Input
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`))
			return
		}
		var data []map[string]any
		for k := len(req.Input) - 1; k >= 0; k-- {
			data = append(data, map[string]any{"object": "embedding", "index": k, "embedding": []float64{float64(len(req.Input[k])), float64(k)}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
			"usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3}})
	}))
	t.Cleanup(srv.Close)
	// A local server: its URL and no key.
	c := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(""), option.WithMaxRetries(0))
	return &c
}

func TestEmbedderSendsTheTextsAndReturnsTheirVectorsInOrder(t *testing.T) {
	var got []string
	e := openai.NewEmbedder(embeddingsServer(t, 0, &got), "nomic-embed-text")
	vecs, err := e.Embed(t.Context(), []string{"a", "bbb", "cc"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "bbb", "cc"}) {
		t.Fatalf("the server got %q", got)
	}
	want := [][]float32{{1, 0}, {3, 1}, {2, 2}}
	for k := range want {
		if !slices.Equal(vecs[k], want[k]) {
			t.Fatalf("vectors %v, want %v (in the order of the texts)", vecs, want)
		}
	}
	if e.Name() != "openai:nomic-embed-text" {
		t.Errorf("Name() = %q", e.Name())
	}
}

func TestEmbedderOutageIsARetryableModelError(t *testing.T) {
	var got []string
	e := openai.NewEmbedder(embeddingsServer(t, http.StatusServiceUnavailable, &got), "nomic-embed-text")
	_, err := e.Embed(t.Context(), []string{"a"})
	if err == nil || !model.IsRetryable(err) {
		t.Fatalf("a 503 is %v, want a retryable model error", err)
	}
}
