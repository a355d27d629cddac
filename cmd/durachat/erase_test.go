package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/config"
)

// durachat erase erases a message through the server and prints its
// receipt; -receipt prints it again; the message reads back as erased.
func TestEraseErasesAMessageThroughTheServerAndPrintsItsReceipt(t *testing.T) {
	base, _ := start(t, map[string]string{config.EnvData: t.TempDir(), config.EnvAddr: "127.0.0.1:0"})
	if resp, _ := post(t, base+"/v1/chats/e/messages", "", map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "my number is 12345678"}, map[string]any{"role": "user", "content": "the rest"}}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base, "-seq", "0"}, lookup(nil), &out, nil); err != nil {
		t.Fatal(err)
	}
	var rec wire.Erasure
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || len(rec.Messages) != 1 || rec.Messages[0].Seq != 0 {
		t.Fatalf("erase printed %s (%v)", out.String(), err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base, "-receipt", rec.Erasure}, lookup(nil), &out, nil); err != nil || !strings.Contains(out.String(), rec.Erasure) {
		t.Fatalf("erase -receipt: %v %s", err, out.String())
	}
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base, "-match", "abc"}, lookup(nil), &out, nil); err == nil || !strings.Contains(err.Error(), "match") {
		t.Fatalf("too short a match: %v", err)
	}
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base, "-receipt", strings.Repeat("0", 24)}, lookup(nil), &out, nil); err == nil {
		t.Fatal("an unknown erasure's receipt: no error")
	}
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base, "-receipt", "nope"}, lookup(nil), &out, nil); err == nil {
		t.Fatal("a malformed erasure id: no error")
	}
	if got := strings.Join(messagesOf(t, base, "e"), "\n"); strings.Contains(got, "12345678") {
		t.Fatalf("read-back after the erasure: %s", got)
	}
	if err := run(t.Context(), []string{"erase", "-chat", "e", "-url", base}, lookup(nil), &out, nil); err == nil {
		t.Fatal("erase with nothing named: no error")
	}
}
