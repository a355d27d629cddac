package hooks

import (
	"encoding/json"
	"slices"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/refs"
)

// A provider request is walked as raw JSON: only the objects and lists on
// the way to a ref block are decoded, and only those holding a changed block
// are encoded again. Everything else, including fields durachat has never
// heard of, is written back byte for byte.

// jsonValue is a value of the rebuilt request: raw bytes, or a container
// some of whose parts changed. The request is written out once, at the end,
// rather than every container re-encoding its children.
type jsonValue interface {
	jsonLen() int
	appendJSON(dst []byte) []byte
}

// rawValue is JSON text as it is.
type rawValue json.RawMessage

func (v rawValue) jsonLen() int                 { return len(v) }
func (v rawValue) appendJSON(dst []byte) []byte { return append(dst, v...) }

// quoted is a JSON string made of parts that need no escaping (base64, a
// MIME type, "data:" and ";base64,"), written without joining them first.
type quoted []string

func (q quoted) jsonLen() int {
	n := 2
	for _, s := range q {
		n += len(s)
	}
	return n
}

func (q quoted) appendJSON(dst []byte) []byte {
	dst = append(dst, '"')
	for _, s := range q {
		dst = append(dst, s...)
	}
	return append(dst, '"')
}

// encode writes v out in one buffer of its size.
func encode(v jsonValue) json.RawMessage {
	return v.appendJSON(make([]byte, 0, v.jsonLen()))
}

// object is a new JSON object of values.
func object(values map[string]jsonValue) *rawObject {
	fields := make(map[string]json.RawMessage, len(values))
	for k := range values {
		fields[k] = nil
	}
	return &rawObject{fields: fields, over: values, changed: true}
}

// rawObject is a decoded JSON object whose fields stay raw; over holds the
// fields that changed.
type rawObject struct {
	fields  map[string]json.RawMessage
	over    map[string]jsonValue
	changed bool
}

func (o *rawObject) set(key string, v jsonValue) {
	if o.over == nil {
		o.over = map[string]jsonValue{}
	}
	o.over[key] = v
	o.changed = true
}

// Fields are read through fieldLen and appendField, not as a jsonValue, so
// that an unchanged field's bytes are not boxed in an interface.

func (o *rawObject) fieldLen(key string) int {
	if v, ok := o.over[key]; ok {
		return v.jsonLen()
	}
	return len(o.fields[key])
}

func (o *rawObject) appendField(dst []byte, key string) []byte {
	if v, ok := o.over[key]; ok {
		return v.appendJSON(dst)
	}
	return append(dst, o.fields[key]...)
}

func (o *rawObject) jsonLen() int {
	n := 2
	for k := range o.fields {
		n += len(k) + 8 + o.fieldLen(k)
	}
	return n
}

func (o *rawObject) appendJSON(dst []byte) []byte {
	keys := make([]string, 0, len(o.fields))
	for k := range o.fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendKey(dst, k)
		dst = append(dst, ':')
		dst = o.appendField(dst, k)
	}
	return append(dst, '}')
}

// rawList is a decoded JSON array whose items stay raw; over holds the
// items that changed.
type rawList struct {
	items   []json.RawMessage
	over    map[int]jsonValue
	changed bool
}

func (l *rawList) set(i int, v jsonValue) {
	if l.over == nil {
		l.over = map[int]jsonValue{}
	}
	l.over[i] = v
	l.changed = true
}

func (l *rawList) itemLen(i int) int {
	if v, ok := l.over[i]; ok {
		return v.jsonLen()
	}
	return len(l.items[i])
}

func (l *rawList) appendItem(dst []byte, i int) []byte {
	if v, ok := l.over[i]; ok {
		return v.appendJSON(dst)
	}
	return append(dst, l.items[i]...)
}

func (l *rawList) jsonLen() int {
	n := 2
	for i := range l.items {
		n += 1 + l.itemLen(i)
	}
	return n
}

func (l *rawList) appendJSON(dst []byte) []byte {
	dst = append(dst, '[')
	for i := range l.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = l.appendItem(dst, i)
	}
	return append(dst, ']')
}

// picture is what fills a ref's place: inline base64 or a URL.
type picture struct {
	name     string
	mimeType string
	b64      string
	url      string
}

// slot is one exact ref block in a place restore looks at.
type slot struct {
	name string
	path string
	// canImage is false where the format cannot carry an image.
	canImage bool
	// fill puts an image block in the ref block's place.
	fill func(p picture) error
}

// walk is a provider request being restored.
type walk struct {
	slots []*slot
	// images counts the image blocks the request already carries.
	images int
	// steps re-encode changed containers, inner ones first.
	steps []func() error
}

func (w *walk) after(step func() error) { w.steps = append(w.steps, step) }

// commit re-encodes every changed container up to the top.
func (w *walk) commit() error {
	for _, s := range w.steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// commitObject hands o to set once the walk is done, if it changed.
func (w *walk) commitObject(o *rawObject, set func(jsonValue)) {
	w.after(func() error {
		if o.changed {
			set(o)
		}
		return nil
	})
}

// commitList hands l to set once the walk is done, if it changed.
func (w *walk) commitList(l *rawList, set func(jsonValue)) {
	w.after(func() error {
		if l.changed {
			set(l)
		}
		return nil
	})
}

func parseObject(raw json.RawMessage, path string) (*rawObject, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, api.BadRequest(path, "%s must be a JSON object", path)
	}
	return &rawObject{fields: m}, nil
}

func parseList(raw json.RawMessage, path string) (*rawList, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, api.BadRequest(path, "%s must be a JSON array", path)
	}
	return &rawList{items: items}, nil
}

// stringField returns o's string field key; "" when absent and not required.
func stringField(o *rawObject, key, path string, required bool) (string, error) {
	raw, ok := o.fields[key]
	if !ok || isNull(raw) {
		if required {
			return "", api.BadRequest(path+"."+key, "%s.%s is required", path, key)
		}
		return "", nil
	}
	s, ok := jsonString(raw)
	if !ok {
		return "", api.BadRequest(path+"."+key, "%s.%s must be a string", path, key)
	}
	return s, nil
}

// walkMessages parses the request's top object and its "messages" list, and
// calls each for every message with its role (a required string). The
// request is rebuilt by build.
func walkMessages(req json.RawMessage, each func(w *walk, msg *rawObject, path, role string) error) (w *walk, build func() (json.RawMessage, error), err error) {
	top, err := parseObject(req, "request")
	if err != nil {
		return nil, nil, err
	}
	raw, ok := top.fields["messages"]
	if !ok || isNull(raw) {
		return nil, nil, api.BadRequest("request.messages", "request.messages is required")
	}
	msgs, err := parseList(raw, "request.messages")
	if err != nil {
		return nil, nil, err
	}
	w = &walk{}
	for i := range msgs.items {
		path := index("request.messages", i)
		msg, err := parseObject(msgs.items[i], path)
		if err != nil {
			return nil, nil, err
		}
		role, err := stringField(msg, "role", path, true)
		if err != nil {
			return nil, nil, err
		}
		if err := each(w, msg, path, role); err != nil {
			return nil, nil, err
		}
		w.commitObject(msg, func(v jsonValue) { msgs.set(i, v) })
	}
	w.commitList(msgs, func(v jsonValue) { top.set("messages", v) })
	return w, func() (json.RawMessage, error) {
		if err := w.commit(); err != nil {
			return nil, err
		}
		if !top.changed {
			return req, nil
		}
		return encode(top), nil
	}, nil
}

// typedContent walks content that is a string or a list of {"type": ...}
// blocks (pi, Anthropic, OpenAI). A text block of type textType whose whole
// text is one ref is a slot; a string content that is one ref is a slot too
// and becomes a one-block list when filled. other sees every other block
// (its list and index, to write a changed block back). set writes changed
// content back into its parent.
func (w *walk) typedContent(raw json.RawMessage, path string, canImage bool, textType string,
	toImage func(p picture, text *rawObject) jsonValue,
	other func(b *rawObject, typ, path string, l *rawList, j int) error,
	set func(jsonValue)) error {
	if isNull(raw) {
		return nil
	}
	if s, ok := jsonString(raw); ok {
		if name := refs.RefName(s); name != "" {
			w.slots = append(w.slots, &slot{name: name, path: path, canImage: canImage, fill: func(p picture) error {
				list := &rawList{items: make([]json.RawMessage, 1)}
				list.set(0, toImage(p, nil))
				set(list)
				return nil
			}})
		}
		return nil
	}
	l, err := parseList(raw, path)
	if err != nil {
		return api.BadRequest(path, "%s must be a string or a list of content blocks", path)
	}
	for j := range l.items {
		bpath := index(path, j)
		b, err := parseObject(l.items[j], bpath)
		if err != nil {
			return err
		}
		typ, err := stringField(b, "type", bpath, true)
		if err != nil {
			return err
		}
		if typ != textType {
			if err := other(b, typ, bpath, l, j); err != nil {
				return err
			}
			continue
		}
		text, err := stringField(b, "text", bpath, false)
		if err != nil {
			return err
		}
		if name := refs.RefName(text); name != "" {
			w.slots = append(w.slots, &slot{name: name, path: bpath, canImage: canImage, fill: func(p picture) error {
				l.set(j, toImage(p, b))
				return nil
			}})
		}
	}
	w.commitList(l, set)
	return nil
}

// ignoreOthers is an other func for content whose other blocks don't matter.
func ignoreOthers(*rawObject, string, string, *rawList, int) error { return nil }
