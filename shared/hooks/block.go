package hooks

import (
	"bytes"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
)

// block is one content block of a hook's request, as after-tool,
// offload-input and before-request all read it: its fields as received,
// in order, each a slice of the body. Nothing is decoded but the strings a
// hook asks for, and a block the hook does not change is written back as
// it came (raw), fields durachat has never heard of included.
type block struct {
	raw    rawjson.Value
	fields []blockField
}

type blockField struct {
	key   string
	value rawjson.Value
}

// parseBlock splits raw, a slice of a body checked valid (rawjson.Valid), as
// a block; ok is false when it is not a JSON object.
func parseBlock(raw rawjson.Value) (b block, ok bool) {
	return splitBlock(raw, make([]blockField, 0, 2)) // a ref block's type and text
}

// splitBlock is parseBlock into fields, a buffer of no length the block
// may take over.
func splitBlock(raw rawjson.Value, fields []blockField) (b block, ok bool) {
	b = block{raw: raw, fields: fields}
	ok = rawjson.Fields(raw, func(k string, v rawjson.Value) {
		b.fields = append(b.fields, blockField{k, v})
	})
	return b, ok
}

// get returns the field key as received; a key given twice has its last
// value, as encoding/json decodes it.
func (b block) get(key string) (rawjson.Value, bool) {
	for i := len(b.fields) - 1; i >= 0; i-- {
		if b.fields[i].key == key {
			return b.fields[i].value, true
		}
	}
	return nil, false
}

// str returns the string field key: "" when it is absent or null; ok is
// false when it is something else.
func (b block) str(key string) (s string, ok bool) {
	v, found := b.get(key)
	if !found || v.IsNull() {
		return "", true
	}
	return v.Text()
}

// isString reports whether the field key is absent, null or a string,
// without copying the string out (an image's base64 runs to megabytes).
func (b block) isString(key string) bool {
	v, found := b.get(key)
	return !found || v.IsNull() || isText(v)
}

// field returns the string field key of block j of the list at path: ""
// when absent or null, or a 400 naming the field when it is not a string
// (or, when required, absent). The path is only made for the 400: a
// request may hold hundreds of thousands of blocks.
func (b block) field(key, path string, j int, required bool) (string, error) {
	v, found := b.get(key)
	if !found || v.IsNull() {
		if required {
			return "", fieldError(index(path, j), key, false)
		}
		return "", nil
	}
	s, ok := v.Text()
	if !ok {
		return "", fieldError(index(path, j), key, true)
	}
	return s, nil
}

// fieldError is the 400 for the field key of the object at path: not a
// string (wrongType), else missing.
func fieldError(path, key string, wrongType bool) error {
	if wrongType {
		return api.BadRequest(path+"."+key, "%s.%s must be a string", path, key)
	}
	return api.BadRequest(path+"."+key, "%s.%s is required", path, key)
}

// object is the block as an object a hook may change: the fields as
// received, but for those it Sets (rawjson.Object).
func (b block) object() *rawjson.Object {
	fields := make(map[string]rawjson.Value, len(b.fields))
	for _, f := range b.fields {
		fields[f.key] = f.value
	}
	return &rawjson.Object{Fields: fields}
}

// isText reports whether raw is a JSON string.
func isText(raw rawjson.Value) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '"'
}

// maxRefJSON is the longest JSON string whose text can be one ref: every
// byte of the ref escaped as \u00XX.
const maxRefJSON = 2 + 6*refs.RefLen

// refIn returns the image name when raw, a JSON string, is exactly one ref
// (refs.RefName), else "". A string too long to be one is not unescaped:
// the texts of a chat run to megabytes.
func refIn(raw rawjson.Value) string {
	if len(bytes.TrimSpace(raw)) > maxRefJSON {
		return ""
	}
	s, _ := raw.Text()
	return refs.RefName(s)
}

// ref returns the image name when the string field key of block j of the
// list at path is exactly one ref: "" when it is not one, or absent or
// null, and a 400 naming the field when it is not a string.
func (b block) ref(key, path string, j int) (string, error) {
	v, found := b.get(key)
	if !found || v.IsNull() {
		return "", nil
	}
	if !isText(v) {
		return "", fieldError(index(path, j), key, true)
	}
	return refIn(v), nil
}
