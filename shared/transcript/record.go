package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
)

// Record is a logged message as the log keeps it for reading back: the
// message's JSON as the host sent it, every field and block included, but
// each image block without its base64 "data", and the names those image
// blocks are stored under, in order. The message's first entry holds it;
// the entries memory makes of the message do not change its shape.
//
// The JSON is compact, and the keys of the message and of its blocks are
// sorted, so twins of one request record the same bytes; every other value
// is kept byte for byte (numbers as written).
type Record struct {
	JSON   json.RawMessage `json:"j"`
	Images []string        `json:"i,omitempty"`
	// enc is the record's own JSON, as rawjson.Of writes it, when
	// makeRecord made it: JSON is a slice of it, so a record moved to a
	// blob is not copied again for it.
	enc rawjson.Value
}

// makeRecord is the record of message m whose image blocks, in order, are
// stored under names.
func makeRecord(m pi.Message, names []string) (*Record, error) {
	raw := m.Raw
	if raw == nil {
		var err error
		if raw, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	if !isCompact(raw) {
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return nil, err
		}
		raw = compact.Bytes()
	}
	msg, ok := rawjson.ParseObject(rawjson.Value(raw))
	if !ok {
		return nil, fmt.Errorf("transcript: a message is not a JSON object")
	}
	if content, ok := rawjson.ParseList(msg.Fields["content"]); ok {
		images := 0
		for j, item := range content.Items {
			b, ok := rawjson.ParseObject(item)
			if !ok {
				return nil, fmt.Errorf("transcript: content block %d is not a JSON object", j)
			}
			if blockType(b) == pi.TypeImage {
				delete(b.Fields, "data")
				images++
			}
			content.Set(j, b)
		}
		if images != len(names) {
			return nil, fmt.Errorf("transcript: %d image blocks, %d names", images, len(names))
		}
		msg.Set("content", content)
	}
	// The record's own JSON ({"j":...,"i":[...]}) is written into one
	// buffer of its length, the message's JSON in its place: a new Object,
	// so its keys are written sorted whether or not a field changed. It is
	// compact, so encoding/json would write it as it is.
	var nameList rawjson.Value
	if len(names) > 0 {
		var err error
		if nameList, err = rawjson.Of(names); err != nil {
			return nil, err
		}
	}
	const head = `{"j":`
	enc := msg.AppendTo(append(make([]byte, 0, len(head)+msg.Len()+len(`,"i":}`)+len(nameList)), head...))
	rec := &Record{JSON: json.RawMessage(enc[len(head):len(enc):len(enc)]), Images: names}
	if nameList != nil {
		enc = append(append(enc, `,"i":`...), nameList...)
	}
	rec.enc = append(enc, '}')
	return rec, nil
}

// isCompact reports whether JSON b has no whitespace outside its strings:
// then json.Compact would copy it as it is.
func isCompact(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++ // the escaped byte is no quote
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// encoded is r as rawjson.Of writes it: makeRecord's, or encoded now.
func (r *Record) encoded() (rawjson.Value, error) {
	if r.enc != nil {
		return r.enc, nil
	}
	return rawjson.Of(r)
}

// blockType is a block's "type", "" when it has none that is a string.
func blockType(b *rawjson.Object) string {
	t, _ := b.Fields["type"].Text()
	return t
}

// Rebuild returns the recorded message with its content blocks passed
// through fn, in order: name is the name an image block is stored under
// ("" for any other block), block the block as recorded (an image block
// has no "data"). fn returns the block to show in its place, or nil to
// keep it as recorded. A message without image blocks, and fn nil, give
// the JSON as recorded.
func (r Record) Rebuild(fn func(name string, block *rawjson.Object) (rawjson.Node, error)) (json.RawMessage, error) {
	if fn == nil {
		return r.JSON, nil
	}
	msg, ok := rawjson.ParseObject(rawjson.Value(r.JSON))
	if !ok {
		return nil, fmt.Errorf("transcript: a recorded message is not a JSON object: %w", errCorrupt)
	}
	content, ok := rawjson.ParseList(msg.Fields["content"])
	if !ok {
		return r.JSON, nil // a string: no blocks
	}
	images := 0
	for j, item := range content.Items {
		b, ok := rawjson.ParseObject(item)
		if !ok {
			return nil, fmt.Errorf("transcript: recorded block %d is not a JSON object: %w", j, errCorrupt)
		}
		name := ""
		if blockType(b) == pi.TypeImage {
			if images >= len(r.Images) {
				return nil, fmt.Errorf("transcript: a recorded message has more image blocks than names: %w", errCorrupt)
			}
			name = r.Images[images]
			images++
		}
		n, err := fn(name, b)
		if err != nil {
			return nil, err
		}
		if n != nil {
			content.Set(j, n)
		}
	}
	if !content.Changed() {
		return r.JSON, nil
	}
	msg.Set("content", content)
	return json.RawMessage(rawjson.Encode(msg)), nil
}
