package lambdafn_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The memory function erases a message and answers its receipt; a bad
// request is a 400 naming the field, an unknown erasure a 404.
func TestTheMemoryFunctionErasesAMessageWithAReceipt(t *testing.T) {
	mem := functions(t)["memory"]
	if status, out, _ := mem.call(t, "/v1/chats/erasing/messages", mustJSON(t, obj{"messages": list{
		obj{"role": "user", "content": "my number is 12345678"}, obj{"role": "user", "content": "the rest"}}})); status != http.StatusOK {
		t.Fatalf("append: %d %.300s", status, out)
	}
	resp := mem.do(t, "POST", "/v1/chats/erasing/erase", "", []byte(`{"seqs":[0]}`))
	var rec struct {
		Erasure  string
		Messages []struct{ Seq int64 }
	}
	if (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted) || json.Unmarshal([]byte(resp.Body), &rec) != nil || len(rec.Messages) != 1 {
		t.Fatalf("erase: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mem.do(t, "GET", "/v1/chats/erasing/erasures/"+rec.Erasure, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("receipt: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mem.do(t, "GET", "/v1/chats/erasing/erasures/"+strings.Repeat("0", 24), "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown erasure: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mem.do(t, "GET", "/v1/chats/erasing/erasures/nope", "", nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed erasure id: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mem.do(t, "POST", "/v1/chats/erasing/erase", "", []byte(`{"match":"abc"}`)); resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, `"match"`) {
		t.Fatalf("too short a match: %d %s", resp.StatusCode, resp.Body)
	}
	if status, out, _ := mem.get(t, "/v1/chats/erasing/messages", ""); status != http.StatusOK || strings.Contains(string(out), "12345678") || !strings.Contains(string(out), `"erased"`) {
		t.Fatalf("read-back after the erasure: %d %s", status, out)
	}
}
