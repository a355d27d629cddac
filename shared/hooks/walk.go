package hooks

import (
	"encoding/json"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/refs"
)

// A provider request is walked as raw JSON: only the objects and lists on
// the way to a ref block are decoded, and only those holding a changed block
// are encoded again. Everything else, including fields durachat has never
// heard of, is written back byte for byte.

// rawObject is a decoded JSON object whose fields stay raw.
type rawObject struct {
	fields  map[string]json.RawMessage
	changed bool
}

// rawList is a decoded JSON array whose items stay raw.
type rawList struct {
	items   []json.RawMessage
	changed bool
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

// commitObject writes o back through set when it changed.
func (w *walk) commitObject(o *rawObject, set func(json.RawMessage)) {
	w.after(func() error {
		if !o.changed {
			return nil
		}
		set(joinObject(o.fields))
		return nil
	})
}

// commitList writes l back through set when it changed.
func (w *walk) commitList(l *rawList, set func(json.RawMessage)) {
	w.after(func() error {
		if !l.changed {
			return nil
		}
		set(joinArray(l.items))
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

// asString decodes raw when it is a JSON string.
func asString(raw json.RawMessage) (string, bool) { return jsonString(raw) }

// messages parses the request's top object and its "messages" list, and
// calls each for every message. The request is rebuilt by build.
func (w *walk) messages(req json.RawMessage, each func(msg *rawObject, path string) error) (build func() (json.RawMessage, error), err error) {
	top, err := parseObject(req, "request")
	if err != nil {
		return nil, err
	}
	raw, ok := top.fields["messages"]
	if !ok || isNull(raw) {
		return nil, api.BadRequest("request.messages", "request.messages is required")
	}
	msgs, err := parseList(raw, "request.messages")
	if err != nil {
		return nil, err
	}
	for i := range msgs.items {
		path := index("request.messages", i)
		msg, err := parseObject(msgs.items[i], path)
		if err != nil {
			return nil, err
		}
		if err := each(msg, path); err != nil {
			return nil, err
		}
		w.commitObject(msg, func(r json.RawMessage) { msgs.items[i] = r; msgs.changed = true })
	}
	w.commitList(msgs, func(r json.RawMessage) { top.fields["messages"] = r; top.changed = true })
	return func() (json.RawMessage, error) {
		if err := w.commit(); err != nil {
			return nil, err
		}
		if !top.changed {
			return req, nil
		}
		return joinObject(top.fields), nil
	}, nil
}

// typedContent walks content that is a string or a list of {"type": ...}
// blocks (pi, Anthropic, OpenAI). A text block of type textType whose whole
// text is one ref is a slot; a string content that is one ref is a slot too
// and becomes a one-block list when filled. other sees every other block
// (its list and index, to write a changed block back). set writes changed
// content back into its parent.
func (w *walk) typedContent(raw json.RawMessage, path string, canImage bool, textType string,
	toImage func(p picture, text *rawObject) (json.RawMessage, error),
	other func(b *rawObject, typ, path string, l *rawList, j int) error,
	set func(json.RawMessage)) error {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		if name := refs.RefName(s); name != "" {
			w.slots = append(w.slots, &slot{name: name, path: path, canImage: canImage, fill: func(p picture) error {
				img, err := toImage(p, nil)
				if err != nil {
					return err
				}
				set(joinArray([]json.RawMessage{img}))
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
				img, err := toImage(p, b)
				if err != nil {
					return err
				}
				l.items[j] = img
				l.changed = true
				return nil
			}})
		}
	}
	w.commitList(l, set)
	return nil
}

// ignoreOthers is an other func for content whose other blocks don't matter.
func ignoreOthers(*rawObject, string, string, *rawList, int) error { return nil }
