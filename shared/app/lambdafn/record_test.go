package lambdafn_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
)

// get invokes f with a GET of path and query, checked as call checks.
func (f *function) get(t *testing.T, path, query string) (int, []byte, int) {
	t.Helper()
	resp, n := f.request(t, http.MethodGet, path, query, nil)
	return resp.StatusCode, []byte(resp.Body), n
}

func TestAMessageNearTheRequestLimitReadsBackExportsAndImportsWithinTheLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("6 MB requests: not in -short")
	}
	t.Parallel()
	mem := functions(t)["memory"]
	img := noisyPNG(t, 3, 600, 600) // about 1.9 MB of base64: stored as it is
	msg := obj{"role": "toolResult", "toolCallId": "c1", "toolName": "shot", "isError": false, "timestamp": 1,
		"details": obj{"host": "x"}, "content": list{obj{"type": "text", "text": strings.Repeat("the tool printed a long log line. ", 4_200_000/34)},
			obj{"type": "image", "mimeType": "image/png", "data": img}}}
	body := mustJSON(t, obj{"messages": list{msg}})
	if len(body) < nearLimit {
		t.Fatalf("the append is only %d bytes", len(body))
	}
	if status, out, _ := mem.call(t, "/v1/chats/big/messages", body); status != http.StatusOK {
		t.Fatalf("append: %d %.300s", status, out)
	}
	sent := mustJSON(t, msg)
	var page struct {
		Messages []struct{ Message json.RawMessage }
	}
	for _, q := range []string{"", "images=inline", "images=links"} {
		status, out, n := mem.get(t, "/v1/chats/big/messages", q) // fails past Lambda's answer limit
		if status != http.StatusOK || json.Unmarshal(out, &page) != nil || len(page.Messages) != 1 {
			t.Fatalf("read back ?%s: %d, %d bytes: %.300s", q, status, n, out)
		}
		if q == "images=inline" && !sameJSON(t, page.Messages[0].Message, sent) {
			t.Fatalf("read back ?%s is not the message sent", q)
		}
	}
	status, export, n := mem.get(t, "/v1/chats/big/export", "")
	if status != http.StatusOK || n < nearLimit {
		t.Fatalf("export: %d, %d bytes: %.300s", status, n, export)
	}
	// Imported elsewhere in pieces, as the Go client sends a line larger
	// than its parts.
	pieces, err := importfile.Cut(bytes.TrimSpace(export), 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pieces {
		if status, out, _ := mem.call(t, "/v1/chats/copy/import", append(p, '\n')); status != http.StatusOK {
			t.Fatalf("piece %d of %d: %d %.300s", i, len(pieces), status, out)
		}
	}
	_, out, _ := mem.get(t, "/v1/chats/copy/messages", "images=inline")
	if json.Unmarshal(out, &page) != nil || len(page.Messages) != 1 || !sameJSON(t, page.Messages[0].Message, sent) {
		t.Fatalf("the import read back: %.300s", out)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		t.Fatalf("not JSON: %.100s / %.100s", a, b)
	}
	return reflect.DeepEqual(va, vb)
}
