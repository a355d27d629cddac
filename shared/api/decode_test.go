package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/fault"
)

// TestDecodeJSONReadsTheWholeBodyWhateverItsDeclaredLength: the declared
// length only sizes the buffer; a body longer or shorter than declared, or
// of unknown length, is still read whole, and the limit still holds.
func TestDecodeJSONReadsTheWholeBodyWhateverItsDeclaredLength(t *testing.T) {
	body := `{"text":"` + strings.Repeat("x", 3000) + `"}`
	tests := []struct {
		name     string
		declared int64
	}{
		{"exact", int64(len(body))},
		{"unknown", -1},
		{"shorter than the body", 10},
		{"longer than the body", int64(len(body)) * 4},
		{"over the limit", MaxBody * 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(body)))
			r.ContentLength = tt.declared
			var v struct{ Text string }
			if err := DecodeJSON(r, &v); err != nil {
				t.Fatal(err)
			}
			if len(v.Text) != 3000 {
				t.Errorf("decoded %d characters of text, want 3000", len(v.Text))
			}
		})
	}
}

func TestDecodeJSONBodyOverTheLimitIs413(t *testing.T) {
	big := bytes.Repeat([]byte(" "), MaxBody+1)
	for _, declared := range []int64{int64(len(big)), -1} {
		r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(bytes.NewReader(big)))
		r.ContentLength = declared
		var e *fault.Error
		if err := DecodeJSON(r, &struct{}{}); !errors.As(err, &e) || answerOf(e.Code).status != http.StatusRequestEntityTooLarge {
			t.Errorf("declared %d: err %v, want a 413", declared, err)
		}
	}
}

// BenchmarkDecodeJSON5MB reads and decodes a 5 MB body of declared length:
// the body is read into one buffer (B/op is about the body plus the
// decoded string).
func BenchmarkDecodeJSON5MB(b *testing.B) {
	body := []byte(`{"data":"` + strings.Repeat("QUJD", 5<<20/4) + `"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		var v struct{ Data string }
		if err := DecodeJSON(r, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeJSONBadBodiesAre400NamingTheField: each bad body is a 400 whose
// field and message say what is wrong, never a 500 or an empty name.
func TestDecodeJSONBadBodiesAre400NamingTheField(t *testing.T) {
	tests := []struct {
		name, body, field, says string
	}{
		{"empty", ``, "", "empty"},
		{"not JSON", `{"text":`, "", "malformed JSON"},
		{"an array, not an object", `[1,2]`, "", "must be a JSON object"},
		{"a string, not an object", `"x"`, "", "must be a JSON object"},
		{"a field of the wrong type", `{"text":5}`, "text", `"text" must be string`},
		{"a nested field of the wrong type", `{"inner":{"n":"x"}}`, "inner.n", `"inner.n" must be int`},
		{"trailing garbage", `{"text":"a"} x`, "", "malformed JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			var v struct {
				Text  string `json:"text"`
				Inner struct {
					N int `json:"n"`
				} `json:"inner"`
			}
			var e *fault.Error
			err := DecodeJSON(r, &v)
			if !errors.As(err, &e) || answerOf(e.Code).status != http.StatusBadRequest {
				t.Fatalf("err %v, want a 400", err)
			}
			if e.Field != tt.field || !strings.Contains(e.Message, tt.says) {
				t.Fatalf("field %q message %q, want field %q saying %q", e.Field, e.Message, tt.field, tt.says)
			}
		})
	}
}

func TestDotSegmentChatIDsAreRefused(t *testing.T) {
	for _, c := range []string{".", ".."} {
		r := httptest.NewRequest(http.MethodGet, "/v1/chats/x", nil)
		r.SetPathValue("chat", c)
		if _, err := Chat(r); err == nil {
			t.Errorf("chat %q accepted", c)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/chats/x", nil)
	r.SetPathValue("chat", "a.b")
	if _, err := Chat(r); err != nil {
		t.Errorf("chat a.b refused: %v", err)
	}
}

// TestABodyThatIsNotUTF8IsRefusedNamingTheString: JSON text is UTF-8;
// encoding/json would read other bytes as U+FFFD, so they are refused
// with a 400 naming the string that holds them.
func TestABodyThatIsNotUTF8IsRefusedNamingTheString(t *testing.T) {
	for _, tt := range []struct {
		body, field string
	}{
		{"{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}]}", "messages[0].content"},
		{"{\"call\":{\"name\":\"t\"},\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xc3(\"}]}}", "result.content[0].text"},
		{"{\"name\":\"0123456789abcdef\",\"type\":\"image/png\xff\"}", "type"},
		{"{\"k\xfe\":1}", ""},
		{"\"\xff\"", ""},
		{"{\"a\":\"\xff", ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		var v any
		err := DecodeJSON(r, &v)
		e := AsError(err)
		if e == nil || e.Code != fault.BadRequest || e.Field != tt.field || !strings.Contains(e.Message, "not UTF-8") {
			t.Errorf("%q: err %v, want a 400 naming %q", tt.body, err, tt.field)
		}
	}
	var v any
	if err := DecodeJSON(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"t":"é 😀 \ud800"}`)), &v); err != nil {
		t.Errorf("UTF-8 refused: %v", err)
	}
}
