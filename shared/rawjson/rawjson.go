// Package rawjson keeps JSON as it was received. A document is decoded only
// as far as a caller looks into it: the values it does not change are
// slices of the input, written back byte for byte, fields it has never
// heard of included; only the containers holding a changed value are
// written again, and the whole document is written once, at the end.
package rawjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Value is a JSON value as received: a slice of the input it was decoded
// from, not a copy of it.
//
// encoding/json asks an Unmarshaler to copy what it keeps, for decoders that
// reuse their buffer; Value does not. It is sound while the input is not
// written to afterwards, and json.Unmarshal hands each value over as a slice
// of its input (TestValueIsASliceOfTheInput checks that). A Value is capped
// at its end, so an append copies rather than write over the input.
type Value []byte

// UnmarshalJSON keeps b itself.
func (v *Value) UnmarshalJSON(b []byte) error {
	*v = b[:len(b):len(b)]
	return nil
}

// MarshalJSON returns v as it is; an empty Value is null.
func (v Value) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// IsNull reports whether v is absent or JSON null.
func (v Value) IsNull() bool {
	return len(v) == 0 || bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// Text returns v as a string, if it is one, as json.Unmarshal makes it. A
// string without escapes (base64 always) is the bytes between its quotes:
// no second scan, but for the check that they are UTF-8 (json.Unmarshal
// replaces what is not), at memory speed.
func (v Value) Text() (string, bool) {
	raw := bytes.TrimSpace(v)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return word(inner), true
	}
	if s, ok := unescape(raw[1 : len(raw)-1]); ok {
		return s, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// unescape is the text of a JSON string's inside q, as json.Unmarshal
// makes it, at memory speed: a text of megabytes (a function's answer of
// images, as its gateway unwraps it) has long runs between its escapes.
// ok is false for what it leaves to json.Unmarshal: a run that is not
// plain UTF-8 (a quote or control byte, invalid UTF-8, which json.Unmarshal
// replaces), a surrogate escape, or an escape that is not JSON's.
func unescape(q []byte) (string, bool) {
	var out strings.Builder // its String is not a second copy
	out.Grow(len(q))
	for {
		i := bytes.IndexByte(q, '\\')
		run := q
		if i >= 0 {
			run = q[:i]
		}
		if !plainRun(run) {
			return "", false
		}
		out.Write(run)
		if i < 0 {
			return out.String(), true
		}
		n, ok := appendEscape(&out, q[i:])
		if !ok {
			return "", false
		}
		q = q[i+n:]
	}
}

// appendEscape writes what the escape at the start of q stands for and
// returns its length; ok is false for what unescape leaves to
// json.Unmarshal.
func appendEscape(out *strings.Builder, q []byte) (n int, ok bool) {
	if len(q) < 2 {
		return 0, false
	}
	switch c := q[1]; c {
	case '"', '\\', '/':
		out.WriteByte(c)
	case 'b':
		out.WriteByte('\b')
	case 'f':
		out.WriteByte('\f')
	case 'n':
		out.WriteByte('\n')
	case 'r':
		out.WriteByte('\r')
	case 't':
		out.WriteByte('\t')
	case 'u':
		if len(q) < 6 {
			return 0, false
		}
		r, err := strconv.ParseUint(string(q[2:6]), 16, 16)
		if err != nil || utf16.IsSurrogate(rune(r)) {
			return 0, false
		}
		out.WriteRune(rune(r))
		return 6, true
	default:
		return 0, false
	}
	return 2, true
}

// plainRun reports whether b can stand in a JSON string as it is: valid
// UTF-8 without a quote or a control byte.
func plainRun(b []byte) bool {
	if bytes.IndexByte(b, '"') >= 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

// word returns b as a string, without allocating when it is one of the
// words content blocks repeat in every block (their keys, types and
// roles): a request may hold hundreds of thousands of blocks.
func word(b []byte) string {
	switch string(b) { // compared in place, not converted
	case "type":
		return "type"
	case "text":
		return "text"
	case "image":
		return "image"
	case "content":
		return "content"
	case "role":
		return "role"
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "source":
		return "source"
	case "data":
		return "data"
	case "mimeType":
		return "mimeType"
	case "tool_result":
		return "tool_result"
	case "toolResult":
		return "toolResult"
	}
	return string(b)
}

// Of encodes v as JSON without HTML escaping (text such as "<chat>" is kept
// as written, not inflated sixfold) and without a trailing newline.
func Of(v any) (Value, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// String is s as a JSON string, as Of writes it (AppendString).
func String(s string) Value { return AppendString(nil, s) }

// Node is a value of a document being rebuilt: a Value, a Quoted string, or
// a container some of whose parts changed.
type Node interface {
	// Len is the length of the node's JSON.
	Len() int
	// AppendTo appends the node's JSON to dst.
	AppendTo(dst []byte) []byte
}

// Len is the length of v.
func (v Value) Len() int { return len(v) }

// AppendTo appends v to dst.
func (v Value) AppendTo(dst []byte) []byte { return append(dst, v...) }

// Quoted is a JSON string made of parts that need no escaping (base64, a
// MIME type, "data:" and ";base64,"), written without joining them first.
type Quoted []string

// Len is the length of the quoted string's JSON.
func (q Quoted) Len() int {
	n := 2
	for _, s := range q {
		n += len(s)
	}
	return n
}

// AppendTo appends the quoted string to dst.
func (q Quoted) AppendTo(dst []byte) []byte {
	dst = append(dst, '"')
	for _, s := range q {
		dst = append(dst, s...)
	}
	return append(dst, '"')
}

// Base64 is a JSON string of Prefix (text that needs no escaping, such as
// "data:image/png;base64,") and Data in standard base64, encoded straight
// into the document as it is written: the base64 is never held apart.
// Bytes the document holds at more than one place share one Once: they are
// encoded once, where the first of them is written, and copied from there
// to the others.
type Base64 struct {
	Prefix string
	Data   []byte
	Once   *Encoded
}

// Encoded is where the Base64 sharing it were first written: a slice of
// that document, which must not be written over while the others are
// written (the buffers of Encode and of an answer being written are not).
type Encoded struct{ text []byte }

// Len is the length of the string's JSON.
func (b Base64) Len() int { return 2 + len(b.Prefix) + base64.StdEncoding.EncodedLen(len(b.Data)) }

// AppendTo appends the string to dst.
func (b Base64) AppendTo(dst []byte) []byte {
	dst = append(append(dst, '"'), b.Prefix...)
	switch {
	case b.Once == nil:
		dst = base64.StdEncoding.AppendEncode(dst, b.Data)
	case b.Once.text == nil:
		start := len(dst)
		dst = base64.StdEncoding.AppendEncode(dst, b.Data)
		b.Once.text = dst[start:len(dst):len(dst)]
	default:
		dst = append(dst, b.Once.text...)
	}
	return append(dst, '"')
}

// Encode writes n out in one buffer of its size.
func Encode(n Node) Value {
	return n.AppendTo(make([]byte, 0, n.Len()))
}

// edits are the parts of a container that were replaced.
type edits[K comparable] struct {
	over    map[K]Node
	changed bool
}

func (e *edits[K]) set(k K, n Node) {
	if e.over == nil {
		e.over = map[K]Node{}
	}
	e.over[k] = n
	e.changed = true
}

// Changed reports whether a part was Set, or the container is new.
func (e *edits[K]) Changed() bool { return e.changed }

// Parts are read through partLen and appendPart, not as a Node, so that an
// unchanged part's bytes are not boxed in an interface.

func (e *edits[K]) partLen(k K, raw Value) int {
	if n, ok := e.over[k]; ok {
		return n.Len()
	}
	return len(raw)
}

func (e *edits[K]) appendPart(dst []byte, k K, raw Value) []byte {
	if n, ok := e.over[k]; ok {
		return n.AppendTo(dst)
	}
	return append(dst, raw...)
}

// Object is a JSON object whose fields stay as received, but for those Set
// replaced.
type Object struct {
	Fields map[string]Value
	edits[string]
}

// ParseObject decodes raw as an object of raw fields; ok is false when it
// is not a JSON object.
func ParseObject(raw Value) (o *Object, ok bool) {
	var m map[string]Value
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	return &Object{Fields: m}, true
}

// NewObject returns a new object of nodes.
func NewObject(nodes map[string]Node) *Object {
	fields := make(map[string]Value, len(nodes))
	for k := range nodes {
		fields[k] = nil
	}
	return &Object{Fields: fields, edits: edits[string]{over: nodes, changed: true}}
}

// Set replaces (or adds) the field key.
func (o *Object) Set(key string, n Node) {
	if _, ok := o.Fields[key]; !ok {
		o.Fields[key] = nil
	}
	o.set(key, n)
}

// Len is the most bytes the object's JSON takes (a key's quoting may add
// a few).
func (o *Object) Len() int {
	n := 2
	for k, v := range o.Fields {
		n += len(k) + 8 + o.partLen(k, v)
	}
	return n
}

// AppendTo appends the object, its keys sorted, to dst.
func (o *Object) AppendTo(dst []byte) []byte {
	keys := make([]string, 0, len(o.Fields))
	for k := range o.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendKey(dst, k)
		dst = append(dst, ':')
		dst = o.appendPart(dst, k, o.Fields[k])
	}
	return append(dst, '}')
}

// AppendKey appends k as a JSON object key (Go's quoting is not JSON's).
func AppendKey(dst []byte, k string) []byte {
	return append(dst, String(k)...)
}

// List is a JSON array whose items stay as received, but for those Set
// replaced.
type List struct {
	Items []Value
	edits[int]
}

// ParseList decodes raw as a list of raw items; ok is false when it is not
// a JSON array.
func ParseList(raw Value) (l *List, ok bool) {
	var items []Value
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, false
	}
	return &List{Items: items}, true
}

// Set replaces item i.
func (l *List) Set(i int, n Node) { l.set(i, n) }

// Len is the length of the list's JSON.
func (l *List) Len() int {
	n := 2
	for i, v := range l.Items {
		n += 1 + l.partLen(i, v)
	}
	return n
}

// AppendTo appends the list to dst.
func (l *List) AppendTo(dst []byte) []byte {
	dst = append(dst, '[')
	for i, v := range l.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = l.appendPart(dst, i, v)
	}
	return append(dst, ']')
}
