package imagestest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/durachat/durachat/shared/refs"
)

// Attack is one hostile request: its route under /v1/chats/{chat}/, its
// body, and the statuses it may be answered.
type Attack struct {
	Name   string
	Route  string
	Body   []byte
	Status []int
}

// Attacks are what a tenant sends to exhaust a server's memory, the same
// for the local server and the deployed shape: decompression bombs through
// every route that takes images (past the decode budget, and within it),
// and before-request naming the stored image in every block of a request
// of about size bytes. A heavy image may meet a busy budget: 503.
func Attacks(stored string, size int) []Attack {
	// Past the budget: 7071x7071 of 16-bit RGBA, 400 MB decoded.
	refused := BombPNG(7071, 7071)
	// Within it: 3000x3000 of 16-bit RGBA, 72 MB decoded, then shrunk.
	heavy := BombPNG(3000, 3000)
	heavy2 := BombPNG(2999, 3000)
	okOrBusy := []int{http.StatusOK, http.StatusServiceUnavailable}
	return []Attack{
		{"after-tool: four bombs past the budget", "hooks/after-tool", AfterTool(refused, refused, refused, refused), []int{http.StatusBadRequest}},
		{"after-tool: two heavy images within the budget", "hooks/after-tool", AfterTool(heavy, heavy2), okOrBusy},
		{"offload-input: a heavy image", "hooks/offload-input", mustJSON(map[string]any{"message": map[string]any{"role": "user", "content": imageBlocks(heavy)}}), okOrBusy},
		{"messages: a heavy image", "messages", mustJSON(map[string]any{"receipt": "r-heavy", "messages": []any{map[string]any{"role": "user", "content": imageBlocks(heavy2)}}}), okOrBusy},
		{"messages: a bomb past the budget", "messages", mustJSON(map[string]any{"receipt": "r-refused", "messages": []any{map[string]any{"role": "user", "content": imageBlocks(refused)}}}), []int{http.StatusBadRequest}},
		{fmt.Sprintf("before-request: one image named in every block of %d KiB", size>>10), "hooks/before-request", repeatedRef(stored, size), []int{http.StatusOK}},
	}
}

// AfterTool is an after-tool body whose result carries the images.
func AfterTool(imgs ...[]byte) []byte {
	return mustJSON(map[string]any{
		"call":   map[string]any{"id": "t1", "name": "shot", "nested": false},
		"result": map[string]any{"content": imageBlocks(imgs...), "isError": false},
	})
}

func imageBlocks(imgs ...[]byte) []map[string]any {
	var blocks []map[string]any
	for _, img := range imgs {
		blocks = append(blocks, map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(img), "mimeType": "image/png"})
	}
	return blocks
}

// repeatedRef is an Anthropic before-request body of about size bytes
// whose every block names the same image.
func repeatedRef(name string, size int) []byte {
	block := fmt.Sprintf(`{"type":"text","text":%q}`, refs.Ref(name))
	n := size / (len(block) + 1)
	blocks := strings.Repeat(block+",", n-1) + block
	return []byte(`{"format":"anthropic","mode":"url","request":{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[` + blocks + `]}]}}`)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings, numbers and bools
	}
	return b
}
