package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/durachat/durachat/shared/api"
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

// References records that a chat names images, before a hook stores or
// claims them (lifecycle.Chats.Hold): deleting the chat, or its retention,
// then deletes them when no other chat of the tenant names them, and
// deleting another chat keeps them. Hold refuses a chat being deleted
// (an *api.Error, 409) and returns once no deletion of the images is in
// flight.
type References interface {
	Hold(ctx context.Context, tenant, chat string, names []string) error
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
	result := req.Result
	answer := afterToolAnswer{Stored: []string{}, Inline: []InlineImage{}}
	skip := func(reason string) error {
		answer.Skipped = &reason
		return writeAnswer(w, "result", joinObject(result), answer)
	}
	// A nested call's result goes back to the tool that issued it, not into
	// the transcript; it is none of the hook's business.
	if req.Call.Nested {
		return skip(SkippedNested)
	}
	content, ok := result["content"]
	if !ok || content.IsNull() {
		return api.BadRequest("result.content", "result.content is required")
	}
	maps, blocks, err := decodeContent(content, "result.content")
	if err != nil {
		return err
	}
	if err := o.claim(r.Context(), tenant, chat, blocks, "result.content"); err != nil {
		return err
	}
	if !hasImages(blocks) {
		return writeAnswer(w, "result", joinObject(result), answer)
	}
	if couldPassBound(blocks, maxBytes, maxLines) {
		return skip(SkippedBound)
	}
	out, err := o.offload(r.Context(), tenant, chat, maps, blocks, "result.content")
	if err != nil {
		return err
	}
	result["content"] = rawjson.Encode(&rawjson.List{Items: out.blocks})
	answer.Stored, answer.Inline = out.stored, out.inline
	return writeAnswer(w, "result", joinObject(result), answer)
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
func couldPassBound(blocks []pi.Block, maxBytes, maxLines int) bool {
	n, lines := 0, 0
	for _, b := range blocks {
		switch b.Type {
		case pi.TypeText:
			n += len(b.Text) + 1
			lines += strings.Count(b.Text, "\n") + 1
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
	msg := req.Message
	if role, _ := msg["role"].Text(); role != pi.RoleUser {
		return api.BadRequest("message.role", "message.role must be \"user\"")
	}
	content, ok := msg["content"]
	if !ok || content.IsNull() {
		return api.BadRequest("message.content", "message.content is required")
	}
	maps, blocks, err := decodeContent(content, "message.content")
	if err != nil {
		return err
	}
	if err := o.claim(r.Context(), tenant, chat, blocks, "message.content"); err != nil {
		return err
	}
	answer := offloadInputAnswer{Stored: []string{}, Inline: []InlineImage{}}
	if hasImages(blocks) {
		out, err := o.offload(r.Context(), tenant, chat, maps, blocks, "message.content")
		if err != nil {
			return err
		}
		msg["content"] = rawjson.Encode(&rawjson.List{Items: out.blocks})
		answer.Stored, answer.Inline = out.stored, out.inline
	}
	return writeAnswer(w, "message", joinObject(msg), answer)
}

// offloaded is the content after an offload.
type offloaded struct {
	blocks []rawjson.Value
	stored []string
	inline []InlineImage
}

// offload stores the images of blocks for the chat and replaces each stored
// one by its ref block, in place (images.Batch: every image is checked
// before any is stored, so bad input stores nothing). raw holds the blocks'
// fields as received: blocks that are not replaced are written back with
// their fields unchanged.
func (o *Offload) offload(ctx context.Context, tenant, chat string, raw []map[string]rawjson.Value, blocks []pi.Block, path string) (offloaded, error) {
	var inline []images.Inline
	var at []int // the block of each image
	for i, b := range blocks {
		if b.Type != pi.TypeImage {
			continue
		}
		if b.Data == "" {
			field := index(path, i) + ".data"
			return offloaded{}, api.BadRequest(field, "%s is required: the image as base64", field)
		}
		inline = append(inline, images.Inline{B64: b.Data, Named: b.Name})
		at = append(at, i)
	}
	batch, err := images.Prepare(ctx, inline)
	if refused, ok := errors.AsType[*images.RefusedError](err); ok {
		field := index(path, at[refused.Index]) + ".data"
		return offloaded{}, api.BadRequest(field, "%s: %v", field, refused.Err)
	}
	if err != nil {
		return offloaded{}, err
	}
	var stored []images.Stored
	if err := o.Refs.Hold(ctx, tenant, chat, batch.Names()); err != nil {
		if _, refused := errors.AsType[*api.Error](err); refused {
			return offloaded{}, err
		}
		// Not recorded, not stored: each image stays inline, as when the
		// store fails.
		stored = make([]images.Stored, len(inline))
		for k := range stored {
			stored[k].Err = err
		}
	} else {
		stored = batch.Store(ctx, o.Images, tenant)
	}

	out := offloaded{blocks: make([]rawjson.Value, len(raw)), stored: []string{}, inline: []InlineImage{}}
	listed := map[string]bool{}
	k := 0
	for i, r := range raw {
		if blocks[i].Type != pi.TypeImage {
			out.blocks[i] = joinObject(r)
			continue
		}
		s := stored[k]
		k++
		if s.Err != nil {
			r["data"] = rawjson.String(blocks[i].Data)
			out.blocks[i] = joinObject(r)
			out.inline = append(out.inline, InlineImage{Index: i, Reason: reasonOf(s.Err)})
			continue
		}
		// The ref block keeps the image block's other fields, so a
		// host's annotations survive the round trip through restore.
		ref, err := rawjson.Of(pi.Block{Type: pi.TypeText, Text: refs.Ref(s.Name), Extra: extraOf(r)})
		if err != nil {
			return offloaded{}, err
		}
		out.blocks[i] = ref
		if !listed[s.Name] {
			listed[s.Name] = true
			out.stored = append(out.stored, s.Name)
		}
	}
	return out, nil
}

// claim makes sure every ref block of blocks names a stored image that the
// chat holds: a host that uploaded an image sends its ref block in place of
// its base64, and the upload is checked and stored here
// (images.Store.Claim). A ref to no image and no completed upload is a 400
// naming its block.
func (o *Offload) claim(ctx context.Context, tenant, chat string, blocks []pi.Block, path string) error {
	var names []string
	var at []int
	for i, b := range blocks {
		if b.Type == pi.TypeText {
			if name := refs.RefName(b.Text); name != "" {
				names = append(names, name)
				at = append(at, i)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := o.Refs.Hold(ctx, tenant, chat, names); err != nil {
		return err
	}
	i, err := images.ClaimAll(ctx, o.Images, tenant, names)
	if err != nil {
		return refusal(index(path, at[i]), err)
	}
	return nil
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

func hasImages(blocks []pi.Block) bool {
	for _, b := range blocks {
		if b.Type == pi.TypeImage {
			return true
		}
	}
	return false
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
// split without a second scan (rawjson.Fields), big's own fields are
// stored in *fields as slices of the body, and the other fields are
// decoded into v as readHook would. A body that is not a JSON object, or
// whose big is not one, is decoded by readHook's way whole, for the same
// 400.
func readHookHolding(r *http.Request, v any, big string, fields *map[string]rawjson.Value) (tenant, chat string, err error) {
	tenant, chat, err = api.TenantChat(r)
	if err != nil {
		return "", "", err
	}
	data, err := api.ReadBody(r)
	if err != nil {
		return "", "", err
	}
	if !json.Valid(data) {
		return "", "", api.Unmarshal(data, v)
	}
	rest := []byte{'{'}
	var split map[string]rawjson.Value
	whole := false // decode the whole body instead
	isObject := rawjson.Fields(data, func(k string, val rawjson.Value) {
		// encoding/json matches a field's name regardless of case, and
		// an object given twice for a map is merged into it.
		if strings.EqualFold(k, big) {
			whole = whole || !rawjson.Fields(val, func(k string, v rawjson.Value) {
				if split == nil {
					split = map[string]rawjson.Value{}
				}
				split[k] = v
			})
			return
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(rawjson.AppendKey(rest, k), ':')
		rest = append(rest, val...)
	})
	if !isObject || whole || split == nil {
		return tenant, chat, api.Unmarshal(data, v)
	}
	if err := api.Unmarshal(append(rest, '}'), v); err != nil {
		return "", "", err
	}
	*fields = split
	return tenant, chat, nil
}

// decodeContent decodes pi content, a slice of a body checked valid: a string (no blocks) or a list of
// blocks, each as its raw fields and as the pi.Block fields offload reads.
// An image block's raw fields leave out its data: the string is all offload
// needs, and it is the only copy of the base64 the request keeps.
func decodeContent(content rawjson.Value, path string) ([]map[string]rawjson.Value, []pi.Block, error) {
	content = bytes.TrimSpace(content)
	if len(content) > 0 && content[0] == '"' {
		return nil, nil, nil
	}
	// content is a slice of a body checked valid (readHookHolding).
	items, ok := rawjson.ItemList(content)
	if !ok {
		return nil, nil, contentError(content, path)
	}
	maps := make([]map[string]rawjson.Value, len(items))
	for i, it := range items {
		if it.IsNull() {
			continue
		}
		if maps[i], ok = rawjson.FieldMap(it); !ok {
			return nil, nil, contentError(content, path)
		}
	}
	blocks := make([]pi.Block, len(maps))
	for i, fields := range maps {
		bpath := index(path, i)
		if fields == nil {
			return nil, nil, api.BadRequest(bpath, "%s must be a content block object", bpath)
		}
		b := &blocks[i]
		for _, f := range []struct {
			key string
			dst *string
		}{{"type", &b.Type}, {"text", &b.Text}, {"data", &b.Data}, {"mimeType", &b.MimeType}, {"name", &b.Name}} {
			v, ok := fields[f.key]
			if !ok || v.IsNull() {
				continue
			}
			s, ok := v.Text()
			if !ok {
				return nil, nil, api.BadRequest(bpath+"."+f.key, "%s.%s must be a string", bpath, f.key)
			}
			*f.dst = s
		}
		if b.Type == "" {
			return nil, nil, api.BadRequest(bpath+".type", "%s.type is required", bpath)
		}
		if b.Type == pi.TypeImage {
			delete(fields, "data")
		}
	}
	return maps, blocks, nil
}

// contentError names what is wrong with content that is not a list of objects.
func contentError(content rawjson.Value, path string) error {
	var items []rawjson.Value
	if json.Unmarshal(content, &items) != nil {
		return api.BadRequest(path, "%s must be a string or a list of content blocks", path)
	}
	for i, it := range items {
		if t := bytes.TrimSpace(it); len(t) == 0 || t[0] != '{' {
			return api.BadRequest(index(path, i), "%s must be a content block object", index(path, i))
		}
	}
	return api.BadRequest(path, "%s must be a list of content blocks", path)
}

// extraOf returns a block's fields that pi.Block does not name.
func extraOf(m map[string]rawjson.Value) map[string]json.RawMessage {
	extra := map[string]json.RawMessage{}
	for k, v := range m {
		if !pi.IsBlockField(k) {
			extra[k] = json.RawMessage(v)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	return extra
}
