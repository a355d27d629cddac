package rawjson

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInvalidUTF8NamesTheStringHoldingTheBytes(t *testing.T) {
	for _, c := range []struct {
		doc  string
		path string
		bad  bool
	}{
		{`{"messages":[{"role":"user","content":"fine é 😀"}]}`, "", false},
		{`{"a":"\ud800"}`, "", false}, // an escape is UTF-8 text, whatever it stands for
		{"\"bad \xff\"", "", true},
		{"{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}]}", ".messages[0].content", true},
		{"{\"messages\":[{\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"text\",\"text\":\"\xc3\"}]}]}", ".messages[0].content[1].text", true},
		{"{\"a\":[1, true, null, {\"b\":\"\\\"x\\\\\"}, \"\xed\xa0\x80\"]}", ".a[4]", true}, // an encoded surrogate
		{"{\"a\":{\"k\xff\":1}}", ".a", true}, // a key names its object
		{"{\"a\\\"b\":{\"c\":\"\xfe\"}}", ".a\"b.c", true},
		{" [ \"ok\" , [ ] , { } , \"\xff\" ] ", "[3]", true},
		{"{\"a\":\"\xff\"", "", true}, // not JSON
	} {
		path, bad := InvalidUTF8([]byte(c.doc))
		if path != c.path || bad != c.bad {
			t.Errorf("InvalidUTF8(%q) = %q, %v; want %q, %v", c.doc, path, bad, c.path, c.bad)
		}
	}
}

// A string deep in a document is found once, not once for each level
// above it: a hostile body cannot make the search quadratic.
func TestInvalidUTF8LooksAtEachByteOnce(t *testing.T) {
	const depth = maxDepth - 1
	doc := strings.Repeat("[", depth) + `"` + strings.Repeat("QUJD", 1<<18) + `",` + "\"\xff\"" + strings.Repeat("]", depth)
	path, bad := InvalidUTF8([]byte(doc))
	if !bad || !strings.HasSuffix(path, "[0][1]") || len(path) != 3*depth {
		t.Fatalf("path %.40q... (%d bytes), bad %v", path, len(path), bad)
	}
}

// FuzzInvalidUTF8AgreesWithUTF8Valid: a document is bad exactly when its
// bytes are not UTF-8, and a JSON document's bad string is named by a
// path that leads to it.
func FuzzInvalidUTF8AgreesWithUTF8Valid(f *testing.F) {
	for _, doc := range validCases {
		f.Add([]byte(doc))
	}
	f.Add([]byte("{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe x\"}]}"))
	f.Add([]byte("{\"a\":[{\"b\xff\":1},\"\xc3\"]}"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		path, bad := InvalidUTF8(doc)
		if bad == utf8.Valid(doc) {
			t.Fatalf("InvalidUTF8(%q) bad %v, utf8.Valid %v", doc, bad, utf8.Valid(doc))
		}
		if !bad || !json.Valid(doc) {
			return
		}
		if !leadsToBytesNotUTF8(Value(doc), path) {
			t.Fatalf("InvalidUTF8(%q) names %q, which holds no bytes that are not UTF-8", doc, path)
		}
	})
}

// leadsToBytesNotUTF8 reports whether path, as InvalidUTF8 writes paths,
// leads in doc to a value holding bytes that are not UTF-8, on some
// reading of it: a key holding '.' or '[' (or given twice) makes a path
// mean more than one thing.
func leadsToBytesNotUTF8(doc Value, path string) bool {
	switch {
	case path == "":
		return !utf8.Valid(doc)
	case path[0] == '[':
		end := strings.IndexByte(path, ']')
		n, err := strconv.Atoi(path[1:end])
		items, ok := ItemList(doc)
		return err == nil && ok && n < len(items) && leadsToBytesNotUTF8(items[n], path[end+1:])
	}
	found := false
	Fields(doc, func(k string, v Value) {
		if rest, ok := strings.CutPrefix(path[1:], k); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			found = found || leadsToBytesNotUTF8(v, rest)
		}
	})
	return found
}
