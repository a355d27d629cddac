package hooks

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// The host's default bound on a tool result's text (pi's own default).
const (
	DefaultMaxBytes = 50 * 1024
	DefaultMaxLines = 2000
)

// Offload serves after-tool and offload-input: it moves the images of a tool
// result or a user message into the tenant's image store and puts ref blocks
// in their place. Every image it stores or claims is recorded for the chat
// in the route first (Refs), so it is the chat's as a logged one is.
type Offload struct {
	Images ImageWriter
	Refs   References
}

// References records that a chat names images, then runs store (when not
// nil), which stores or claims them (lifecycle.Chats.Hold, the one order
// of every writer of images for a chat: prepared, named, held, stored):
// deleting the chat, or its retention, then deletes them when no other
// chat of the tenant names them, also when that deletion began while
// store ran, and deleting another chat keeps them. Hold refuses a chat
// being deleted (a *fault.Error, 409), runs store once no deletion of the
// images is in flight, and returns the chat's incarnation.
type References interface {
	Hold(ctx context.Context, tenant, chat string, names []string, store func(context.Context) error) (chatid.Chat, error)
}

// ImageWriter is the image store offload writes to (images.Store): it
// stores inline images and claims the images ref blocks name.
type ImageWriter interface {
	images.Writer
	images.Claimer
}

// NewOffload returns an Offload writing to imgs, its images recorded for
// their chats in refs.
func NewOffload(imgs ImageWriter, refs References) *Offload {
	return &Offload{Images: imgs, Refs: refs}
}

// Register adds the offload routes to mux.
func (o *Offload) Register(mux *http.ServeMux) {
	api.Handle(mux, "POST /v1/chats/{chat}/hooks/after-tool", o.afterTool)
	api.Handle(mux, "POST /v1/chats/{chat}/hooks/offload-input", o.offloadInput)
}

// Skip reasons of after-tool.
const (
	SkippedNested = "nested"
	SkippedBound  = "bound"
)

type afterToolRequest struct {
	Call   *toolCall                `json:"call"`
	Result map[string]rawjson.Value `json:"result"`
	Bounds *bounds                  `json:"bounds"`
}

type toolCall struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Nested bool   `json:"nested"`
}

type bounds struct {
	MaxBytes *int `json:"maxBytes"`
	MaxLines *int `json:"maxLines"`
}

// afterToolAnswer is the answer but its result, written around it.
type afterToolAnswer struct {
	Stored  []string      `json:"stored"`
	Inline  []InlineImage `json:"inline"`
	Skipped *string       `json:"skipped"`
}

// The request is decoded once into raw fields and blocks; a 5 MB result
// is not scanned over and over (see BenchmarkAfterTool5MB).
func (o *Offload) afterTool(w http.ResponseWriter, r *http.Request) error {
	var req afterToolRequest
	tenant, chat, err := readHookHolding(r, &req, "result", &req.Result)
	if err != nil {
		return err
	}
	if req.Call == nil {
		return api.BadRequest("call", "call is required: {\"id\", \"name\", \"nested\"}")
	}
	maxBytes, maxLines, err := req.Bounds.resolve()
	if err != nil {
		return err
	}
	if req.Result == nil {
		return api.BadRequest("result", "result is required: {\"content\": [blocks], \"isError\"}")
	}
	result := &rawjson.Object{Fields: req.Result}
	answer := afterToolAnswer{Stored: []string{}, Inline: []InlineImage{}}
	skip := func(reason string) error {
		answer.Skipped = &reason
		return writeAnswer(w, "result", result, answer)
	}
	// A nested call's result goes back to the tool that issued it, not into
	// the transcript; it is none of the hook's business.
	if req.Call.Nested {
		return skip(SkippedNested)
	}
	raw, ok := result.Fields["content"]
	if !ok || raw.IsNull() {
		return api.BadRequest("result.content", "result.content is required")
	}
	content, err := readPiContent(raw, "result.content")
	if err != nil {
		return err
	}
	if err := o.claim(r.Context(), tenant, chat, content); err != nil {
		return err
	}
	if !content.hasImages() {
		return writeAnswer(w, "result", result, answer)
	}
	if couldPassBound(content.blocks, maxBytes, maxLines) {
		return skip(SkippedBound)
	}
	if answer.Stored, answer.Inline, err = o.offload(r.Context(), tenant, chat, content); err != nil {
		return err
	}
	result.Set("content", content.list)
	return writeAnswer(w, "result", result, answer)
}

func (b *bounds) resolve() (maxBytes, maxLines int, err error) {
	maxBytes, maxLines = DefaultMaxBytes, DefaultMaxLines
	if b == nil {
		return maxBytes, maxLines, nil
	}
	if b.MaxBytes != nil {
		if *b.MaxBytes < 1 {
			return 0, 0, api.BadRequest("bounds.maxBytes", "bounds.maxBytes must be a positive number of bytes, not %d", *b.MaxBytes)
		}
		maxBytes = *b.MaxBytes
	}
	if b.MaxLines != nil {
		if *b.MaxLines < 1 {
			return 0, 0, api.BadRequest("bounds.maxLines", "bounds.maxLines must be a positive number of lines, not %d", *b.MaxLines)
		}
		maxLines = *b.MaxLines
	}
	return maxBytes, maxLines, nil
}

// couldPassBound reports whether a result's text, once each image is a ref
// block, could pass the host's bound. A host bounds a result by keeping one
// text block, which would drop the refs, so such a result keeps its images.
//
// The text is measured as the host joins it, one newline after each text
// block or ref (counting a newline after the last one too errs on the side
// of keeping images): bytes = text bytes + 24 per ref + one per piece;
// lines = the lines of each text block (newlines + 1) + one per ref. Either
// over its limit means the result could pass the bound.
func couldPassBound(blocks []block, maxBytes, maxLines int) bool {
	n, lines := 0, 0
	for _, b := range blocks {
		switch b.typ() {
		case pi.TypeText:
			text, _ := b.str("text")
			n += len(text) + 1
			lines += strings.Count(text, "\n") + 1
		case pi.TypeImage:
			n += refs.RefLen + 1
			lines++
		}
	}
	return n > maxBytes || lines > maxLines
}

type offloadInputRequest struct {
	Message map[string]rawjson.Value `json:"message"`
}

// offloadInputAnswer is the answer but its message, written around it.
type offloadInputAnswer struct {
	Stored []string      `json:"stored"`
	Inline []InlineImage `json:"inline"`
}

func (o *Offload) offloadInput(w http.ResponseWriter, r *http.Request) error {
	var req offloadInputRequest
	tenant, chat, err := readHookHolding(r, &req, "message", &req.Message)
	if err != nil {
		return err
	}
	if req.Message == nil {
		return api.BadRequest("message", "message is required: {\"role\": \"user\", \"content\"}")
	}
	msg := &rawjson.Object{Fields: req.Message}
	if role, _ := msg.Fields["role"].Text(); role != pi.RoleUser {
		return api.BadRequest("message.role", "message.role must be \"user\"")
	}
	raw, ok := msg.Fields["content"]
	if !ok || raw.IsNull() {
		return api.BadRequest("message.content", "message.content is required")
	}
	content, err := readPiContent(raw, "message.content")
	if err != nil {
		return err
	}
	if err := o.claim(r.Context(), tenant, chat, content); err != nil {
		return err
	}
	answer := offloadInputAnswer{Stored: []string{}, Inline: []InlineImage{}}
	if content.hasImages() {
		if answer.Stored, answer.Inline, err = o.offload(r.Context(), tenant, chat, content); err != nil {
			return err
		}
		msg.Set("content", content.list)
	}
	return writeAnswer(w, "message", msg, answer)
}

// offload stores the images of content for the chat and puts each stored
// one's ref block in its place in content.list (images.Incoming: every image
// is checked before any is stored, so bad input stores nothing). It
// returns the names stored and the images left inline, and why.
func (o *Offload) offload(ctx context.Context, tenant, chat string, content *piContent) (stored []string, inline []InlineImage, err error) {
	imgs, at, err := content.images()
	if err != nil {
		return nil, nil, err
	}
	incoming, err := images.Prepare(ctx, imgs) // a refused image is a 400 naming its field
	if err != nil {
		return nil, nil, err
	}
	var outcome []images.Stored
	_, err = o.Refs.Hold(ctx, tenant, chat, incoming.Names(), func(ctx context.Context) error {
		outcome = incoming.Store(ctx, o.Images, tenant)
		return nil
	})
	if err != nil {
		if _, refused := errors.AsType[*fault.Error](err); refused {
			return nil, nil, err
		}
		// Not recorded (or, once stored, not known to be recorded for a
		// deletion begun meanwhile): each image stays inline, as when the
		// store fails.
		outcome = make([]images.Stored, len(imgs))
		for k := range outcome {
			outcome[k].Err = err
		}
	}
	stored, inline = []string{}, []InlineImage{}
	listed := map[string]bool{}
	for k, s := range outcome {
		i := at[k]
		if s.Err != nil {
			// The block stays as it came.
			inline = append(inline, InlineImage{Index: i, Reason: reasonOf(s.Err)})
			continue
		}
		content.list.Set(i, refBlock(content.blocks[i], s.Name))
		if !listed[s.Name] {
			listed[s.Name] = true
			stored = append(stored, s.Name)
		}
	}
	return stored, inline, nil
}

// refBlock is the ref block that takes the place of image block b. It
// keeps the image block's other fields, so a host's annotations survive
// the round trip through restore.
func refBlock(b block, name string) rawjson.Node {
	o := b.object()
	for k := range o.Fields {
		if pi.IsBlockField(k) {
			delete(o.Fields, k)
		}
	}
	o.Set("type", rawjson.String(pi.TypeText))
	o.Set("text", rawjson.String(refs.Ref(name)))
	return o
}

// claim makes sure every ref block of content names a stored image that
// the chat holds: a host that uploaded an image sends its ref block in
// place of its base64, and the upload is checked and stored here
// (images.Store.Claim). A ref to no image and no completed upload is a 400
// naming its block.
func (o *Offload) claim(ctx context.Context, tenant, chat string, content *piContent) error {
	var names []string
	var at []int
	for i, b := range content.blocks {
		if b.typ() == pi.TypeText {
			text, _ := b.str("text")
			if name := refs.RefName(text); name != "" {
				names = append(names, name)
				at = append(at, i)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	_, err := o.Refs.Hold(ctx, tenant, chat, names, func(ctx context.Context) error {
		i, err := images.ClaimAll(ctx, o.Images, tenant, names)
		if err != nil {
			return refusal(index(content.path, at[i]), err)
		}
		return nil
	})
	return err
}

// reasonOf is why a store's err leaves an image inline (after-tool,
// offload-input) or a ref as text (before-request): the one mapping of
// store errors to reasons.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ReasonNotFound
	case store.IsOutage(err):
		return ReasonUnavailable
	}
	return ReasonError
}

// readHook checks a hook request's caller and chat, and decodes its body
// into v. The tenant is the authenticated caller's: a request without one
// never reaches a store.
func readHook(r *http.Request, v any) (tenant, chat string, err error) {
	tenant, chat, err = api.TenantChat(r)
	if err != nil {
		return "", "", err
	}
	return tenant, chat, api.DecodeJSON(r, v)
}

// readHookHolding is readHook for a body whose field named big holds the
// request's images (a 5 MB tool result): the body is checked once and
// split without a second scan (splitHookBody), big's own fields are
// stored in *fields as slices of the body, and the other fields are
// decoded into v as readHook would. A body that is not a JSON object, or
// whose big is not one, is decoded by readHook's way whole, for the same
// 400.
func readHookHolding(r *http.Request, v any, big string, fields *map[string]rawjson.Value) (tenant, chat string, err error) {
	tenant, chat, data, err := readHookBody(r)
	if err != nil {
		return "", "", err
	}
	var split map[string]rawjson.Value
	// An object given twice for a map is merged into it.
	rest, ok := splitHookBody(data, big, func(val rawjson.Value) bool {
		return rawjson.Fields(val, func(k string, v rawjson.Value) {
			if split == nil {
				split = map[string]rawjson.Value{}
			}
			split[k] = v
		})
	})
	if !ok || split == nil {
		return tenant, chat, api.Unmarshal(data, v)
	}
	if err := api.Unmarshal(rest, v); err != nil {
		return "", "", err
	}
	*fields = split
	return tenant, chat, nil
}

// readHookRaw is readHook for a body whose field named big is a document
// of its own, walked later (a provider request of megabytes): the body is
// checked once and split without a second scan (splitHookBody), *raw is
// big's value as a slice of the body (the last given, as encoding/json
// takes it), and the other fields are decoded into v as readHook would.
// A body that is not a JSON object is decoded by readHook's way whole,
// for the same 400.
func readHookRaw(r *http.Request, v any, big string, raw *rawjson.Value) (tenant, chat string, err error) {
	tenant, chat, data, err := readHookBody(r)
	if err != nil {
		return "", "", err
	}
	var last rawjson.Value
	rest, ok := splitHookBody(data, big, func(val rawjson.Value) bool {
		last = val
		return true
	})
	if !ok {
		return tenant, chat, api.Unmarshal(data, v)
	}
	*raw = last
	return tenant, chat, api.Unmarshal(rest, v)
}

// readHookBody checks a hook request's caller and chat, and reads its body
// (api.ReadBody).
func readHookBody(r *http.Request) (tenant, chat string, data []byte, err error) {
	tenant, chat, err = api.TenantChat(r)
	if err != nil {
		return "", "", nil, err
	}
	data, err = api.ReadBody(r)
	return tenant, chat, data, err
}

// splitHookBody checks data once (rawjson.Valid) and splits it
// (rawjson.Fields): take is given the value of each field named big (in
// any case, as encoding/json matches a field's name) as a slice of data,
// and rest is the other fields as an object of their own. ok is false
// when data is not a valid JSON object or take refused a value: decode
// data whole then, for the same 400.
func splitHookBody(data []byte, big string, take func(rawjson.Value) bool) (rest []byte, ok bool) {
	if !rawjson.Valid(data) {
		return nil, false
	}
	rest = []byte{'{'}
	took := true
	isObject := rawjson.Fields(data, func(k string, val rawjson.Value) {
		if strings.EqualFold(k, big) {
			took = take(val) && took
			return
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(rawjson.AppendKey(rest, k), ':')
		rest = append(rest, val...)
	})
	return append(rest, '}'), isObject && took
}

// piContent is the pi content of a hook's request (a tool result's, or a
// user message's): a string, which has no images, or a list of blocks.
type piContent struct {
	path   string
	list   *rawjson.List // the blocks as written back; nil for a string
	blocks []block       // item i of list
}

// piStrings are the fields of a pi block the hooks read, each a string
// when present.
var piStrings = []string{"type", "text", "data", "mimeType", "name"}

// readPiContent reads raw, a slice of a body checked valid: every block an
// object with a type, and the fields of piStrings strings. The blocks are
// checked in order once all are known to be objects.
func readPiContent(raw rawjson.Value, path string) (*piContent, error) {
	c := &piContent{path: path}
	if isText(raw) {
		return c, nil
	}
	items, ok := rawjson.ItemList(raw)
	if !ok {
		return nil, api.BadRequest(path, "%s must be a string or a list of content blocks", path)
	}
	c.list = &rawjson.List{Items: items}
	for i, it := range items {
		b, ok := parseBlock(it)
		if !ok && !it.IsNull() {
			return nil, api.BadRequest(index(path, i), "%s must be a content block object", index(path, i))
		}
		if !ok {
			b = block{}
		}
		c.blocks = append(c.blocks, b)
	}
	for i, b := range c.blocks {
		bpath := index(path, i)
		if b.raw == nil { // null: refused in order, after the blocks before it
			return nil, api.BadRequest(bpath, "%s must be a content block object", bpath)
		}
		for _, key := range piStrings {
			if !b.isString(key) {
				return nil, api.BadRequest(bpath+"."+key, "%s.%s must be a string", bpath, key)
			}
		}
		if b.typ() == "" {
			return nil, api.BadRequest(bpath+".type", "%s.type is required", bpath)
		}
	}
	return c, nil
}

// typ is a block's type ("" when it has none).
func (b block) typ() string {
	t, _ := b.str("type")
	return t
}

func (c *piContent) hasImages() bool {
	for _, b := range c.blocks {
		if b.typ() == pi.TypeImage {
			return true
		}
	}
	return false
}

// images lists the content's inline images, with the block of each. The
// base64 is copied out of the body here, once: it is the text the image is
// named and decoded from.
func (c *piContent) images() (imgs []images.Inline, at []int, err error) {
	for i, b := range c.blocks {
		if b.typ() != pi.TypeImage {
			continue
		}
		data, _ := b.str("data")
		field := index(c.path, i) + ".data"
		if data == "" {
			return nil, nil, api.BadRequest(field, "%s is required: the image as base64", field)
		}
		name, _ := b.str("name")
		imgs = append(imgs, images.Inline{B64: data, Named: name, Field: field})
		at = append(at, i)
	}
	return imgs, at, nil
}
