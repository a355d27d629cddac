package rawjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
)

// Value relies on json.Unmarshal handing a value to its UnmarshalJSON as a
// slice of its input, and on the cap keeping appends off the input.
func TestValueIsASliceOfTheInput(t *testing.T) {
	body := []byte(`{"content":[1,2]}`)
	var got map[string]Value
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	body[bytes.IndexByte(body, '1')] = '7'
	if string(got["content"]) != "[7,2]" {
		t.Fatalf("content %s is a copy, not a slice of the input", got["content"])
	}
	_ = append(got["content"], ',')
	if string(body) != `{"content":[7,2]}` {
		t.Fatalf("appending to a value wrote over the input: %s", body)
	}
}

func TestValueText(t *testing.T) {
	tests := []struct {
		raw    string
		want   string
		isText bool
	}{
		{`"plain"`, "plain", true},
		{` "spaced" `, "spaced", true},
		{`"esc\"aped\u00e9"`, `esc"apedé`, true},
		{`""`, "", true},
		{`12`, "", false},
		{`null`, "", false},
		{`"unterminated`, "", false},
		{`"bad \x escape"`, "", false},
		{`"every escape: \" \\ \/ \b \f \n \r \t \u0041\u2028"`, "every escape: \" \\ / \b \f \n \r \t A\u2028", true},
		{`"a pair \ud83d\ude00"`, "a pair \U0001F600", true},
		{`"a lone surrogate \ud83d"`, "a lone surrogate \uFFFD", true},
		{"\"invalid UTF-8 \xff\\n\"", "invalid UTF-8 \uFFFD\n", true},
		{"\"invalid UTF-8 without an escape \xd8\"", "invalid UTF-8 without an escape \uFFFD", true},
		{"\"a control byte \x01\\n\"", "", false},
		{`"a quote " inside\n"`, "", false},
		{`"a short \u12"`, "", false},
		{`"a trailing \"`, "", false},
	}
	for _, tt := range tests {
		got, ok := Value(tt.raw).Text()
		if got != tt.want || ok != tt.isText {
			t.Errorf("%s: %q %v, want %q %v", tt.raw, got, ok, tt.want, tt.isText)
		}
	}
}

// Text reads a JSON string as json.Unmarshal does.
func FuzzTextReadsAsEncodingJSONDoes(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\n\u00e9\ud83d\ude00"`, `"\ud83d"`, "\"\xff\\t\"", `"\u12"`, `"a\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 || raw[0] != '"' || !json.Valid(raw) {
			return // a Value is a slice of a valid document, its spaces cut
		}
		var want string
		err := json.Unmarshal(raw, &want)
		got, ok := Value(raw).Text()
		if ok != (err == nil) || got != want {
			t.Fatalf("%q: Text %q %v, json.Unmarshal %q %v", raw, got, ok, want, err)
		}
	})
}

func TestValueIsNull(t *testing.T) {
	for raw, want := range map[string]bool{"": true, "null": true, " null\n": true, `"null"`: false, "0": false, "{}": false} {
		if got := Value(raw).IsNull(); got != want {
			t.Errorf("%q: IsNull %v, want %v", raw, got, want)
		}
	}
}

// Unchanged values are written back as received, changed ones in their
// place, keys sorted.
func TestRebuildKeepsWhatDidNotChange(t *testing.T) {
	in := Value(`{"z": {"keep" : [1, 2]}, "list": [ "a", {"b":1}, 3 ], "k<&>": "x<y"}`)
	top, ok := ParseObject(in)
	if !ok {
		t.Fatal("not an object")
	}
	list, ok := ParseList(top.Fields["list"])
	if !ok {
		t.Fatal("not a list")
	}
	list.Set(1, NewObject(map[string]Node{"data": Quoted{"data:", "image/png", ";base64,", "QUJD"}, "t": String("<img>")}))
	top.Set("list", list)
	if !top.Changed() || !list.Changed() {
		t.Fatal("Set did not mark the containers changed")
	}
	got := string(Encode(top))
	want := `{"k<&>":"x<y","list":["a",{"data":"data:image/png;base64,QUJD","t":"<img>"},3],"z":{"keep" : [1, 2]}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("not JSON")
	}
}

func TestParseRefusesOtherShapes(t *testing.T) {
	for _, raw := range []string{"null", "[]", `"s"`, "{", ""} {
		if _, ok := ParseObject(Value(raw)); ok {
			t.Errorf("ParseObject took %q", raw)
		}
	}
	for _, raw := range []string{"null", "{}", `"s"`, "[", ""} {
		if _, ok := ParseList(Value(raw)); ok {
			t.Errorf("ParseList took %q", raw)
		}
	}
}

func TestBase64IsTheStringItsLenSays(t *testing.T) {
	for _, tt := range []struct {
		prefix string
		data   []byte
	}{
		{"", nil},
		{"", []byte{0xff}},
		{"", []byte("two")},
		{"data:image/png;base64,", []byte("\x89PNG\r\n\x1a\n and more")},
	} {
		n := Base64{Prefix: tt.prefix, Data: tt.data}
		got := Encode(n)
		var s string
		if err := json.Unmarshal(got, &s); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", tt.data, got, err)
		}
		if want := tt.prefix + base64.StdEncoding.EncodeToString(tt.data); s != want {
			t.Errorf("%q: %q, want %q", tt.data, s, want)
		}
		if len(got) != n.Len() || cap(got) != n.Len() {
			t.Errorf("%q: %d bytes written in a buffer of %d, Len %d", tt.data, len(got), cap(got), n.Len())
		}
	}
}

// TestBase64SharingOnceIsEncodedOnce: Base64 strings sharing a Once write
// what each would alone, the base64 encoded at the first one written and
// copied to the others (bytes changed after it are not read again).
func TestBase64SharingOnceIsEncodedOnce(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("\x89PNG\r\n\x1a\n and more")} {
		data = slices.Clone(data)
		want := base64.StdEncoding.EncodeToString(data)
		once := &Encoded{}
		first, url := Base64{Data: data, Once: once}, Base64{Prefix: "data:image/png;base64,", Data: data, Once: once}
		got := Encode(&List{Items: make([]Value, 2), edits: edits[int]{over: map[int]Node{0: first, 1: url}}})
		var strs []string
		if err := json.Unmarshal(got, &strs); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if strs[0] != want || strs[1] != url.Prefix+want {
			t.Errorf("%q: wrote %q, want %q and its data URL", data, strs, want)
		}
		if len(data) > 0 {
			data[0] = 'x'
		}
		if again := Encode(url); string(again) != `"`+url.Prefix+want+`"` {
			t.Errorf("%q: written again as %s: encoded again, not copied", data, again)
		}
	}
}
