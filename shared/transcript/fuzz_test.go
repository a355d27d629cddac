package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
)

// FuzzDecodeAppend: any body decodes to messages or to a 400 that names a
// field of the request, never a panic; messages the log takes are UTF-8
// throughout, so they read back as JSON.
func FuzzDecodeAppend(f *testing.F) {
	for _, s := range []string{
		`{"receipt":"k","messages":[{"role":"user","content":"hi"}]}`,
		`{"receipt":"k","messages":[{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"x","arguments":{"a":1}},{"type":"thinking","thinking":"t"}]}]}`,
		`{"receipt":"k","messages":[{"role":"toolResult","toolName":"zoom","toolCallId":"z","content":[{"type":"image","data":"AAAA","mimeType":"image/png","name":"0123456789abcdef"}],"details":{"id":3}}]}`,
		`{"messages":[{"role":"user","content":[{"text":"no type"}]}]}`,
		`{"messages":[null,{"role":5}]}`,
		`[]`, `null`, `{"messages":"x"}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeAppend(data)
		if err != nil {
			var ae *fault.Error
			if !errors.As(err, &ae) || ae.Code != fault.BadRequest {
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
		if checkMessages(req.Messages) != nil { // must not panic either
			return
		}
		for i, m := range req.Messages {
			if !utf8.Valid(m.Raw) {
				t.Fatalf("message %d is taken, though it is not UTF-8: %q", i, m.Raw)
			}
		}
	})
}

// FuzzSplitAndCap: pieces join back to the text, each within the limit and
// cut between runes, with no ref split; a capped text is within the limit
// and lists every ref of its cut middle.
func FuzzSplitAndCap(f *testing.F) {
	f.Add("hello [image 0123456789abcdef] world", 30)
	f.Add(strings.Repeat("é[image 0123456789abcdef]x", 20), 25)
	f.Add(strings.Repeat("🙂", 300), 24)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if !utf8.ValidString(text) || max < refs.RefLen || max > 1000 {
			return
		}
		parts := splitText(text, max)
		if strings.Join(parts, "") != text {
			t.Fatal("pieces do not join back")
		}
		for _, p := range parts {
			if utf8.RuneCountInString(p) > max || !utf8.ValidString(p) {
				t.Fatalf("piece %q over %d or cut in a rune", p, max)
			}
		}
		names := refs.Names(strings.Join(parts, "\x00"))
		if len(names) != len(refs.Names(text)) {
			t.Fatalf("a ref was split: %d names in pieces, %d in text", len(names), len(refs.Names(text)))
		}

		limit := 130 + max%200
		capped := capText(text, limit)
		body := capped
		for {
			i := strings.LastIndex(body, "\n[image ")
			if i < 0 || refs.RefName(body[i+1:]) == "" {
				break
			}
			body = body[:i]
		}
		if utf8.RuneCountInString(body) > limit {
			t.Fatalf("capped text has %d characters, limit %d", utf8.RuneCountInString(body), limit)
		}
		got := map[string]bool{}
		for _, n := range refs.Names(capped) {
			got[n] = true
		}
		for _, n := range refs.Names(text) {
			if !got[n] {
				t.Fatalf("ref %s lost by the cap", n)
			}
		}
	})
}

// FuzzRecordKeepsTheMessage: the record of any message DecodeAppend takes,
// rebuilt with its images' data, is the same JSON value as the message
// sent, and holds no image data itself.
func FuzzRecordKeepsTheMessage(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi","timestamp":1}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"s"},{"type":"toolCall","id":"1","name":"x","arguments":{"b":1,"a":[1.50,2e3]}}],"usage":{"cost":{"total":0.1}},"x":null}]}`,
		`{"messages":[{"role":"toolResult","toolName":"t","toolCallId":"z","content":[{"type":"image","data":"QUJD","mimeType":"image/png","k":{"z":1}},{"type":"text","text":""}],"details":{"id":3},"isError":true}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"\u00e9\u2028<"}],"kind":"note"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeAppend(data)
		if err != nil || checkMessages(req.Messages) != nil {
			return // refused before anything is recorded
		}
		for i, m := range req.Messages {
			var names []string
			data := map[string]string{}
			for _, b := range m.Content.Blocks {
				if b.Type == pi.TypeImage {
					name := fmt.Sprintf("%016x", len(names))
					names = append(names, name)
					data[name] = b.Data
				}
			}
			rec, err := makeRecord(m, names)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			for _, d := range data {
				if len(d) >= 4 && bytes.Contains(rec.JSON, []byte(`"data":`)) {
					t.Fatalf("message %d: the record holds image data: %s", i, rec.JSON)
				}
			}
			back, err := rec.Rebuild(func(name string, b *rawjson.Object) (rawjson.Node, error) {
				if name == "" {
					return nil, nil
				}
				b.Set("data", rawjson.String(data[name]))
				return b, nil
			})
			if err != nil {
				t.Fatalf("message %d: rebuilding: %v", i, err)
			}
			if !utf8.Valid(rec.JSON) || !utf8.Valid(back) {
				t.Fatalf("message %d: recorded %q, which is not UTF-8", i, rec.JSON)
			}
			if !sameValue(t, back, m.Raw) {
				t.Fatalf("message %d: recorded %s\nsent %s", i, back, m.Raw)
			}
		}
	})
}

// sameValue reports whether a and b are the same JSON value, numbers
// compared as written.
func sameValue(t *testing.T, a, b []byte) bool {
	t.Helper()
	norm := func(raw []byte) string {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
}
