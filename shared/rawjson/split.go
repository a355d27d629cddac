package rawjson

import (
	"bytes"
	"encoding/json"
)

// A document that has passed one validity check (Valid) is split
// here without encoding/json's scanner, which looks at every byte through
// a function call, once for each level a value is decoded at: strings,
// nearly all of a request holding images, are skipped at memory speed
// (bytes.IndexByte), and no value is checked again.

// Fields calls fn for each field of the JSON object raw, in order, with
// its key unescaped and its value a slice of raw, capped as a Value is.
// raw must be valid JSON (Valid): it is not checked again. It reports
// whether raw is an object.
func Fields(raw Value, fn func(key string, v Value)) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if raw[i] == '}' {
		return true
	}
	for {
		keyEnd := stringEnd(raw, i)
		key := unquoteKey(raw[i:keyEnd])
		i = skipSpace(raw, skipSpace(raw, keyEnd)+1) // past the colon
		end := valueEnd(raw, i)
		fn(key, raw[i:end:end])
		i = skipSpace(raw, end)
		if raw[i] == '}' {
			return true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// Items calls fn for each item of the JSON array raw, in order, as a slice
// of raw. raw must be valid JSON. It reports whether raw is an array.
func Items(raw Value, fn func(v Value)) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return false
	}
	i = skipSpace(raw, i+1)
	if raw[i] == ']' {
		return true
	}
	for {
		end := valueEnd(raw, i)
		fn(raw[i:end:end])
		i = skipSpace(raw, end)
		if raw[i] == ']' {
			return true
		}
		i = skipSpace(raw, i+1)
	}
}

// FieldMap is the object raw as a map of its fields, as json.Unmarshal
// into a map[string]Value makes it (a key given twice keeps its last
// value). raw must be valid JSON; ok is false when it is not an object.
func FieldMap(raw Value) (fields map[string]Value, ok bool) {
	fields = map[string]Value{}
	if !Fields(raw, func(k string, v Value) { fields[k] = v }) {
		return nil, false
	}
	return fields, true
}

// ItemList is the array raw as a list of its items. raw must be valid
// JSON; ok is false when it is not an array.
func ItemList(raw Value) (items []Value, ok bool) {
	// A list of up to grownItems items is collected in one pass, grown as
	// it goes (about 100 KB of garbage at most). A longer one is counted
	// in that pass and collected in a second, allocated once, so a list of
	// a hundred thousand items is not grown through garbage five times its
	// size: a second pass over the same bytes costs less than that.
	n := 0
	if !Items(raw, func(v Value) {
		if n < grownItems {
			items = append(items, v)
		}
		n++
	}) {
		return nil, false
	}
	if n <= grownItems {
		if items == nil {
			items = []Value{}
		}
		return items, true
	}
	items = make([]Value, 0, n)
	Items(raw, func(v Value) { items = append(items, v) })
	return items, true
}

// grownItems is the longest list ItemList collects in one pass.
const grownItems = 1024

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string that opens at b[i].
func stringEnd(b []byte, i int) int {
	i++
	for {
		q := i + bytes.IndexByte(b[i:], '"')
		// The quote closes the string unless an odd run of backslashes
		// escapes it; a run cannot reach back past i, which is the
		// string's start or just past an escaped quote.
		n := 0
		for p := q - 1; p >= i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		return containerEnd(b, i)
	default: // a number, true, false or null
		for i < len(b) && !endsLiteral(b[i]) {
			i++
		}
		return i
	}
}

// containerEnd returns the index just past the object or array that
// starts at b[i].
func containerEnd(b []byte, i int) int {
	depth := 0
	for {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
}

// endsLiteral reports whether c ends a number, true, false or null.
func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// unquoteKey unescapes a key as encoding/json does (invalid UTF-8 becomes
// U+FFFD), taking the fast way when there is nothing to unescape.
func unquoteKey(q []byte) string {
	plain := true
	for _, c := range q {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return word(q[1 : len(q)-1])
	}
	var s string
	json.Unmarshal(q, &s) // valid JSON: a key is a string
	return s
}
