package hooks

import (
	"bytes"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
)

// A provider request is walked as raw JSON (package rawjson), a slice of a
// body checked valid: only the objects and lists on the way to a ref block
// are split, each block read as the hooks read every block (block), and
// only the containers holding a changed block are written again, straight
// into the answer. Everything else, including fields durachat has never
// heard of, is written back byte for byte.

// picture is what fills a ref's place: an image's bytes, written as base64
// straight into the answer (rawjson.Base64), or a URL.
type picture struct {
	name     string
	mimeType string
	data     []byte
	// once, for an image more than one ref names, has its base64 encoded
	// once for them all.
	once *rawjson.Encoded
	url  string
}

// base64 is the picture's bytes as a JSON string of base64 after prefix.
func (p picture) base64(prefix string) rawjson.Base64 {
	return rawjson.Base64{Prefix: prefix, Data: p.data, Once: p.once}
}

// imageMaker makes a format's image block of p, in the place of the ref
// block ref (whose fields it may keep; no fields for a string content).
type imageMaker func(p picture, ref block) rawjson.Node

// slot is one exact ref block in a place restore looks at.
type slot struct {
	name string
	// canImage is false where the format cannot carry an image.
	canImage bool
	// The ref block is item index of list. With no list, the ref is a
	// whole string content, which set writes back.
	list  *rawjson.List
	index int
	set   func(rawjson.Node)
	image imageMaker
	// msg is the index of the message the ref is in; attached is true for
	// a ref in a user message's own content (an image the user attached),
	// false in a tool result.
	msg      int
	attached bool
}

// fill puts an image block of p in the ref block's place. The ref block is
// split again here, not kept: a request may hold hundreds of thousands of
// ref blocks.
func (s *slot) fill(p picture) {
	if s.list == nil {
		l := &rawjson.List{Items: make([]rawjson.Value, 1)}
		l.Set(0, s.image(p, block{}))
		s.set(l)
		return
	}
	ref, _ := parseBlock(s.list.Items[s.index]) // an object: split once already
	s.list.Set(s.index, s.image(p, ref))
}

// text replaces the ref block's text (a described ref).
func (s *slot) text(t string) {
	if s.list == nil {
		s.set(rawjson.String(t))
		return
	}
	ref, _ := parseBlock(s.list.Items[s.index])
	o := ref.object()
	o.Set("text", rawjson.String(t))
	s.list.Set(s.index, o)
}

// walk is a provider request being restored.
type walk struct {
	slots []slot
	// images counts the image blocks the request already carries.
	images int
	// steps put changed containers into their parents, inner ones first.
	steps []func()
	// msg and role are the message being walked; lastAssistant is the
	// index of the last assistant message walked, -1 while there is none.
	msg           int
	role          string
	lastAssistant int
}

// add records a ref block of the message being walked; inTool is true
// inside a tool result.
func (w *walk) add(s slot, inTool bool) {
	s.msg = w.msg
	s.attached = w.role == "user" && !inTool
	w.slots = append(w.slots, s)
}

// newestFirst is the order restore spends the inline budget and the
// provider's image limit in: first the refs of the newest turn (the
// messages after the last assistant message: the tool results that just
// ran, or the user's new message), then those the newest user message
// that attached images holds in its own content, then all the others;
// each group from the end of the request back. So when not every image
// fits, the images the model has just asked for and the user's latest
// attachment are the ones it sees.
func (w *walk) newestFirst() []int {
	newestAttached := -1
	for i := range w.slots {
		if w.slots[i].attached {
			newestAttached = max(newestAttached, w.slots[i].msg)
		}
	}
	group := func(s *slot) int {
		switch {
		case s.msg > w.lastAssistant:
			return 0
		case s.attached && s.msg == newestAttached:
			return 1
		}
		return 2
	}
	order := make([]int, 0, len(w.slots))
	for g := range 3 {
		for i := len(w.slots) - 1; i >= 0; i-- {
			if group(&w.slots[i]) == g {
				order = append(order, i)
			}
		}
	}
	return order
}

// commit puts every changed container into its parent, up to the top.
func (w *walk) commit() {
	for _, step := range w.steps {
		step()
	}
}

// commitObject hands o to set once the walk is done, if it changed.
func (w *walk) commitObject(o *rawjson.Object, set func(rawjson.Node)) {
	w.steps = append(w.steps, func() {
		if o.Changed() {
			set(o)
		}
	})
}

// commitList hands l to set once the walk is done, if it changed.
func (w *walk) commitList(l *rawjson.List, set func(rawjson.Node)) {
	w.steps = append(w.steps, func() {
		if l.Changed() {
			set(l)
		}
	})
}

func parseObject(raw rawjson.Value, path string) (*rawjson.Object, error) {
	fields, ok := rawjson.FieldMap(raw)
	if !ok {
		return nil, api.BadRequest(path, "%s must be a JSON object", path)
	}
	return &rawjson.Object{Fields: fields}, nil
}

func parseList(raw rawjson.Value, path string) (*rawjson.List, error) {
	items, ok := rawjson.ItemList(raw)
	if !ok {
		return nil, api.BadRequest(path, "%s must be a JSON array", path)
	}
	return &rawjson.List{Items: items}, nil
}

// walkMessages splits the request's top object and its "messages" list, and
// calls each for every message with its role (a required string). The
// request is rebuilt by build, as a node written straight into the answer.
func walkMessages(req rawjson.Value, each func(w *walk, msg *rawjson.Object, path, role string) error) (w *walk, build func() rawjson.Node, err error) {
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
	// Room for every ref block the request may hold, so a request of a
	// hundred thousand of them does not grow the list through garbage
	// five times its size.
	w = &walk{slots: make([]slot, 0, bytes.Count(req, []byte("[image "))), lastAssistant: -1}
	for i := range msgs.Items {
		path := index("request.messages", i)
		msg, err := parseObject(msgs.Items[i], path)
		if err != nil {
			return nil, nil, err
		}
		role, ok := msg.Fields["role"].Text()
		if !ok || role == "" {
			return nil, nil, fieldError(path, "role", !ok && !msg.Fields["role"].IsNull())
		}
		w.msg, w.role = i, role
		if role == "assistant" {
			w.lastAssistant = i
		}
		if err := each(w, msg, path, role); err != nil {
			return nil, nil, err
		}
		w.commitObject(msg, func(v rawjson.Node) { msgs.Set(i, v) })
	}
	w.commitList(msgs, func(v rawjson.Node) { top.Set("messages", v) })
	return w, func() rawjson.Node {
		w.commit()
		if !top.Changed() {
			return req
		}
		return top
	}, nil
}

// contentRule is how a format reads one place that holds content of
// {"type": ...} blocks (pi, Anthropic, OpenAI): whether an image may go
// there, how the format writes an image block, the type of the image
// blocks it counts, and whether tool_result blocks hold content of their
// own, read by the same rule (Anthropic); inTool is true for the content
// of a tool result.
type contentRule struct {
	canImage    bool
	image       imageMaker
	imageType   string
	toolResults bool
	inTool      bool
}

// typedContent walks content that is a string or a list of blocks. A text
// block whose whole text is one ref is a slot; a string content that is
// one ref is a slot too and becomes a one-block list when filled. set
// writes changed content back into its parent.
func (w *walk) typedContent(raw rawjson.Value, path string, rule contentRule, put func(rawjson.Node)) error {
	if raw.IsNull() {
		return nil
	}
	if isText(raw) {
		if name := refIn(raw); name != "" {
			w.add(slot{name: name, canImage: rule.canImage, set: put, image: rule.image}, rule.inTool)
		}
		return nil
	}
	items, ok := rawjson.ItemList(raw)
	if !ok {
		return api.BadRequest(path, "%s must be a string or a list of content blocks", path)
	}
	l := &rawjson.List{Items: items}
	err := eachBlock(l, path, func(j int, b block) error {
		typ, err := b.field("type", path, j, true)
		if err != nil {
			return err
		}
		switch {
		case typ == "text":
			name, err := b.ref("text", path, j)
			if err != nil {
				return err
			}
			if name != "" {
				w.add(slot{name: name, canImage: rule.canImage, list: l, index: j, image: rule.image}, rule.inTool)
			}
		case typ == rule.imageType:
			w.images++
		case typ == "tool_result" && rule.toolResults:
			o := b.object()
			inner := contentRule{canImage: rule.canImage, image: rule.image, imageType: rule.imageType, inTool: true}
			if err := w.typedContent(o.Fields["content"], index(path, j)+".content", inner, set(o, "content")); err != nil {
				return err
			}
			w.commitObject(o, func(v rawjson.Node) { l.Set(j, v) })
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.commitList(l, put)
	return nil
}

// eachBlock calls fn with each item of l as a block, in order; an item
// that is not an object is a 400 naming it. Every block is split into one
// buffer of fields, so fn keeps no block past its call.
func eachBlock(l *rawjson.List, path string, fn func(j int, b block) error) error {
	var fields []blockField
	for j, it := range l.Items {
		b, ok := splitBlock(it, fields[:0])
		fields = b.fields
		if !ok {
			return api.BadRequest(index(path, j), "%s must be a content block object", index(path, j))
		}
		if err := fn(j, b); err != nil {
			return err
		}
	}
	return nil
}
