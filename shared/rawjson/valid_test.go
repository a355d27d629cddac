package rawjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// validCases are documents on both sides of every rule of JSON's grammar,
// each at a string's eight-byte boundaries too.
var validCases = []string{
	``, ` `, `null`, `nul`, `nulll`, `true`, `tru`, `false`, `falsey`, ` 1 `, `1 2`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `1.5e3`, `12345678901234567890`,
	`""`, `"`, `"abc`, `"a\"b"`, `"a\\"`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u12"`, `"\ud800"`,
	"\"tab\tinside\"", "\"nl\ninside\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe not utf-8\"", "\"é ü 😀\"",
	`"0123456"`, `"01234567"`, `"012345678"`, `"0123456789abcdef"`, `"0123456\"89abcdef"`, "\"01234567\x01\"", `"0123456789abcde\`,
	`[]`, `[ ]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[[[]]]`, `[[]`, `[]]`, `[{}]`, `[{]}`,
	`{}`, `{ }`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,false,null]}`,
	`{1:2}`, `{"a" : 1 , "b" : { "c" : "d" } }`, `{"a":1}}`, `{"a":[1,{"b":"c"}]}`, "{\"a\":1}\n", `{"a":1} x`,
	"\t\r\n {} \t\r\n", "\v{}", `{"a":"` + strings.Repeat("QUJD", 100) + `"}`,
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range validCases {
		if got, want := Valid([]byte(doc)), json.Valid([]byte(doc)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", doc, got, want)
		}
	}
}

func TestValidAllowsTheNestingEncodingJSONAllows(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, pair := range []string{"[]", "{}"} {
			var doc []byte
			if pair == "[]" {
				doc = []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
			} else {
				doc = []byte(strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1))
			}
			if got, want := Valid(doc), json.Valid(doc); got != want {
				t.Errorf("%d levels of %s: Valid %v, json.Valid %v", depth, pair, got, want)
			}
		}
	}
}

func FuzzValidAgreesWithEncodingJSON(f *testing.F) {
	for _, doc := range validCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := Valid(doc), json.Valid(doc); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", doc, got, want)
		}
	})
}

// imagesDocument is a JSON document as a function answers with images:
// base64 text in strings, with a body of JSON inside a string.
func imagesDocument() []byte {
	img := bytes.Repeat([]byte{1, 2, 3, 250, 7}, 300_000)
	inner, _ := json.Marshal(map[string]any{"content": []any{
		map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(img), "mimeType": "image/png"},
		map[string]any{"type": "text", "text": "a screenshot"},
	}})
	doc, _ := json.Marshal(map[string]any{"statusCode": 200, "headers": map[string]string{"Content-Type": "application/json"}, "body": string(inner)})
	return doc
}

// BenchmarkValidOnImages is Valid on a 2 MB document of base64; its
// baseline, json.Valid on the same bytes in the same run.
func BenchmarkValidOnImages(b *testing.B) {
	doc := imagesDocument()
	b.Run("rawjson", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !Valid(doc) {
				b.Fatal("not valid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !json.Valid(doc) {
				b.Fatal("not valid")
			}
		}
	})
}

func TestAppendStringWritesWhatEncodingJSONWrites(t *testing.T) {
	cases := append([]string{"", "plain", "<a & b>", "é\u2028\u2029\u2027", "\x00\x01\x1f\x7f", "\b\f\n\r\t\"\\/",
		"bad \xff\xfe utf-8 \xc3", "\xed\xa0\x80", strings.Repeat("QUJD", 40) + "\"" + strings.Repeat("é", 9)}, validCases...)
	for _, s := range cases {
		checkAppendString(t, s)
	}
}

func FuzzAppendStringWritesWhatEncodingJSONWrites(f *testing.F) {
	for _, s := range validCases {
		f.Add(s)
	}
	f.Fuzz(checkAppendString)
}

func checkAppendString(t *testing.T, s string) {
	want, err := Of(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString(nil, s); !bytes.Equal(got, want) {
		t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
	}
}

// BenchmarkAppendStringOfAnswer is AppendString on the body of a 2 MB
// answer of images; its baseline, encoding/json (Of) on the same text.
func BenchmarkAppendStringOfAnswer(b *testing.B) {
	var body string
	Fields(imagesDocument(), func(k string, v Value) {
		if k == "body" {
			body, _ = v.Text()
		}
	})
	b.Run("rawjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			AppendString(make([]byte, 0, len(body)+len(body)/16), body)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Of(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
