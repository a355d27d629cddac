package hooks

import (
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
)

// A provider request is walked as raw JSON (package rawjson): only the
// objects and lists on the way to a ref block are decoded, and only those
// holding a changed block are encoded again. Everything else, including
// fields durachat has never heard of, is written back byte for byte.

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
	// canImage is false where the format cannot carry an image.
	canImage bool
	// fill puts an image block in the ref block's place.
	fill func(p picture) error
	// text replaces the ref block's text (a described ref).
	text func(s string)
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
func (w *walk) commitObject(o *rawjson.Object, set func(rawjson.Node)) {
	w.after(func() error {
		if o.Changed() {
			set(o)
		}
		return nil
	})
}

// commitList hands l to set once the walk is done, if it changed.
func (w *walk) commitList(l *rawjson.List, set func(rawjson.Node)) {
	w.after(func() error {
		if l.Changed() {
			set(l)
		}
		return nil
	})
}

func parseObject(raw rawjson.Value, path string) (*rawjson.Object, error) {
	o, ok := rawjson.ParseObject(raw)
	if !ok {
		return nil, api.BadRequest(path, "%s must be a JSON object", path)
	}
	return o, nil
}

func parseList(raw rawjson.Value, path string) (*rawjson.List, error) {
	l, ok := rawjson.ParseList(raw)
	if !ok {
		return nil, api.BadRequest(path, "%s must be a JSON array", path)
	}
	return l, nil
}

// stringField returns o's string field key; "" when absent and not required.
func stringField(o *rawjson.Object, key, path string, required bool) (string, error) {
	raw, ok := o.Fields[key]
	if !ok || raw.IsNull() {
		if required {
			return "", api.BadRequest(path+"."+key, "%s.%s is required", path, key)
		}
		return "", nil
	}
	s, ok := raw.Text()
	if !ok {
		return "", api.BadRequest(path+"."+key, "%s.%s must be a string", path, key)
	}
	return s, nil
}

// walkMessages parses the request's top object and its "messages" list, and
// calls each for every message with its role (a required string). The
// request is rebuilt by build.
func walkMessages(req rawjson.Value, each func(w *walk, msg *rawjson.Object, path, role string) error) (w *walk, build func() (rawjson.Value, error), err error) {
	top, err := parseObject(req, "request")
	if err != nil {
		return nil, nil, err
	}
	raw, ok := top.Fields["messages"]
	if !ok || raw.IsNull() {
		return nil, nil, api.BadRequest("request.messages", "request.messages is required")
	}
	msgs, err := parseList(raw, "request.messages")
	if err != nil {
		return nil, nil, err
	}
	w = &walk{}
	for i := range msgs.Items {
		path := index("request.messages", i)
		msg, err := parseObject(msgs.Items[i], path)
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
		w.commitObject(msg, func(v rawjson.Node) { msgs.Set(i, v) })
	}
	w.commitList(msgs, func(v rawjson.Node) { top.Set("messages", v) })
	return w, func() (rawjson.Value, error) {
		if err := w.commit(); err != nil {
			return nil, err
		}
		if !top.Changed() {
			return req, nil
		}
		return rawjson.Encode(top), nil
	}, nil
}

// typedContent walks content that is a string or a list of {"type": ...}
// blocks (pi, Anthropic, OpenAI). A text block of type textType whose whole
// text is one ref is a slot; a string content that is one ref is a slot too
// and becomes a one-block list when filled. other sees every other block
// (its list and index, to write a changed block back). set writes changed
// content back into its parent.
func (w *walk) typedContent(raw rawjson.Value, path string, canImage bool, textType string,
	toImage func(p picture, text *rawjson.Object) rawjson.Node,
	other func(b *rawjson.Object, typ, path string, l *rawjson.List, j int) error,
	set func(rawjson.Node)) error {
	if raw.IsNull() {
		return nil
	}
	if s, ok := raw.Text(); ok {
		if name := refs.RefName(s); name != "" {
			w.slots = append(w.slots, &slot{name: name, canImage: canImage, fill: func(p picture) error {
				list := &rawjson.List{Items: make([]rawjson.Value, 1)}
				list.Set(0, toImage(p, nil))
				set(list)
				return nil
			}, text: func(s string) { set(rawjson.String(s)) }})
		}
		return nil
	}
	l, err := parseList(raw, path)
	if err != nil {
		return api.BadRequest(path, "%s must be a string or a list of content blocks", path)
	}
	for j := range l.Items {
		bpath := index(path, j)
		b, err := parseObject(l.Items[j], bpath)
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
			// The block is parsed again when filled, not kept: a request
			// may hold hundreds of thousands of ref blocks.
			w.slots = append(w.slots, &slot{name: name, canImage: canImage, fill: func(p picture) error {
				b, err := parseObject(l.Items[j], "")
				if err != nil {
					return err
				}
				l.Set(j, toImage(p, b))
				return nil
			}, text: setText(l, j)})
		}
	}
	w.commitList(l, set)
	return nil
}

// setText replaces the text of the block at item j of l. Like fill, it
// parses the block again rather than keep it.
func setText(l *rawjson.List, j int) func(string) {
	return func(s string) {
		b, err := parseObject(l.Items[j], "")
		if err != nil {
			return // parsed once already: it is an object
		}
		b.Set("text", rawjson.String(s))
		l.Set(j, b)
	}
}

// ignoreOthers is an other func for content whose other blocks don't matter.
func ignoreOthers(*rawjson.Object, string, string, *rawjson.List, int) error { return nil }
