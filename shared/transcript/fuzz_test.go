package transcript

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
)

// FuzzDecodeAppend: any body decodes to messages or to a 400 that names a
// field of the request, never a panic.
func FuzzDecodeAppend(f *testing.F) {
	for _, s := range []string{
		`{"receipt":"k","messages":[{"role":"user","content":"hi"}]}`,
		`{"receipt":"k","messages":[{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"x","arguments":{"a":1}},{"type":"thinking","thinking":"t"}]}]}`,
		`{"receipt":"k","messages":[{"role":"toolResult","toolName":"zoom","toolCallId":"z","content":[{"type":"image","data":"AAAA","mimeType":"image/png","name":"0123456789abcdef"}],"details":{"id":3}}]}`,
		`{"messages":[{"role":"user","content":[{"text":"no type"}]}]}`,
		`{"messages":[null,{"role":5}]}`,
		`[]`, `null`, `{"messages":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeAppend(data)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			if f := ae.Field; f != "" && f != "receipt" && !strings.HasPrefix(f, "messages") {
				t.Fatalf("error names field %q", f)
			}
			return
		}
		for i, m := range req.Messages {
			if _, err := json.Marshal(m); err != nil {
				t.Fatalf("message %d does not encode again: %v", i, err)
			}
		}
		_ = checkMessages(req.Messages) // must not panic either
	})
}
