package lifecycle

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// Message is one logged message read back as a pi message; Seq is the id
// of its first entry.
type Message struct {
	Seq     int64           `json:"seq"`
	Message json.RawMessage `json:"message,omitempty"`
	// Erased is when the message was erased; it then has no Message.
	Erased *time.Time `json:"erased,omitempty"`
}

// MessagePage is a page of a chat's messages.
type MessagePage struct {
	Messages []Message `json:"messages"`
	Next     string    `json:"next"`
}

// ImageMode says how a read-back message shows its images.
type ImageMode int

const (
	// ImagesAsRefs shows each image block as its ref block, a text block
	// "[image <name>]"; ref blocks stay as they are.
	ImagesAsRefs ImageMode = iota
	// ImagesAsLinks is ImagesAsRefs with a signed URL ("url") on each ref
	// block.
	ImagesAsLinks
	// ImagesInline shows each image block as it was sent, carrying the
	// stored image's data; ref blocks stay as they are.
	ImagesInline
	// imagesExport is ImagesInline, and names the images ref blocks name,
	// which an export carries on lines of their own.
	imagesExport
)

// MessageQuery asks for a page of a chat's messages: up to N from seq
// From, their images shown as Images says.
type MessageQuery struct {
	From   int64
	N      int
	Images ImageMode
}

// Messages returns up to q.N of the chat's messages from seq q.From, and
// no more than fit PageBudget bytes (at least one), each as the host
// logged it, its images shown as q.Images says. Seqs are entry ids: fixed
// once written, so paging is stable while the chat is appended to.
func (c *Routes) Messages(ctx context.Context, tenant, chat string, q MessageQuery) (MessagePage, error) {
	out := MessagePage{Messages: []Message{}}
	size := 0
	// All of one incarnation: the current one as the call starts.
	ch, _, err := c.ids.Current(ctx, tenant, chat)
	if err != nil {
		return out, err
	}
	err = c.eachMessage(ctx, ch, q.From, func(lg transcript.Logged) (bool, error) {
		if len(out.Messages) == q.N {
			out.Next = strconv.FormatInt(lg.I-1, 10)
			return false, nil
		}
		if !lg.Erased.IsZero() {
			at := lg.Erased
			out.Messages = append(out.Messages, Message{Seq: lg.I, Erased: &at})
			return true, nil
		}
		m, err := c.render(ctx, ch, lg, q.Images, nil)
		if err != nil {
			return false, err
		}
		if len(out.Messages) > 0 && size+len(m) > PageBudget {
			out.Next = strconv.FormatInt(lg.I-1, 10)
			return false, nil
		}
		out.Messages = append(out.Messages, Message{Seq: lg.I, Message: m})
		size += len(m)
		return true, nil
	})
	return out, err
}

// PageBudget bounds the bytes of the messages of one page, and of one
// export part (the rest follows from its ExportNextHeader): under
// Lambda's 6 MB answer, with room for JSON's escapes.
const PageBudget = 4 << 20

// readChunk is how many entries are read at once: a message may be
// megabytes, so a page reads a few at a time and stops at its budget.
const readChunk = 8

// eachMessage calls fn with each message of the chat incarnation ch whose first entry
// is at seq from or later, in order, until fn answers false or the log
// ends. The later entries of a message are passed over.
func (c *Routes) eachMessage(ctx context.Context, ch chatid.Chat, from int64, fn func(transcript.Logged) (bool, error)) error {
	for {
		lgs, err := c.log.Read(ctx, ch, from, from+readChunk)
		if err != nil {
			return err
		}
		if len(lgs) == 0 {
			return nil
		}
		for _, lg := range lgs {
			from = lg.I + 1
			if lg.Continues {
				continue
			}
			more, err := fn(lg)
			if err != nil || !more {
				return err
			}
		}
	}
}

// render is the pi message an entry starts, its images shown as mode
// says. As imagesExport, named hears of each image a ref block names.
func (c *Chats) render(ctx context.Context, ch chatid.Chat, lg transcript.Logged, mode ImageMode, named func(string)) (json.RawMessage, error) {
	if lg.Legacy() {
		return c.renderLegacy(ctx, ch, lg.Entry, mode, named)
	}
	rec := lg.Record
	if mode == ImagesAsRefs && len(rec.Images) == 0 {
		return rec.JSON, nil
	}
	return rec.Rebuild(func(name string, b *rawjson.Object) (rawjson.Node, error) {
		if name == "" {
			return c.refBlock(ctx, ch, b, mode, named)
		}
		return c.imageBlock(ctx, ch, name, b, mode)
	})
}

// refBlock is what a block shows as when it is a ref block: with a signed
// URL as ImagesAsLinks; nil (as recorded) otherwise.
func (c *Chats) refBlock(ctx context.Context, ch chatid.Chat, b *rawjson.Object, mode ImageMode, named func(string)) (rawjson.Node, error) {
	if mode != ImagesAsLinks && mode != imagesExport {
		return nil, nil
	}
	raw := b.Fields["text"]
	if t, _ := b.Fields["type"].Text(); t != "text" || len(raw) > 2*len(refs.Ref("0000000000000000")) {
		return nil, nil // no ref is this long, however escaped: not read at all
	}
	text, _ := raw.Text()
	name := refs.RefName(text)
	if name == "" {
		return nil, nil
	}
	if mode == imagesExport {
		named(name)
		return nil, nil
	}
	u, err := c.link(ctx, ch, name)
	if err != nil || u == "" {
		return nil, err
	}
	b.Set("url", rawjson.String(u))
	return b, nil
}

// imageBlock is what an image block stored under name shows as: its ref
// block (with a URL as ImagesAsLinks), or the block as sent with the
// stored image's data. The MIME type sent is kept while the data is the
// one sent; an image shrunk when stored carries its own. An image no
// longer stored shows as its ref block.
func (c *Chats) imageBlock(ctx context.Context, ch chatid.Chat, name string, b *rawjson.Object, mode ImageMode) (rawjson.Node, error) {
	ref := rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("text"), "text": rawjson.String(refs.Ref(name))})
	switch mode {
	case ImagesAsRefs:
		return ref, nil
	case ImagesAsLinks:
		u, err := c.link(ctx, ch, name)
		if err != nil {
			return nil, err
		}
		if u != "" {
			ref.Set("url", rawjson.String(u))
		}
		return ref, nil
	}
	img, err := c.images.Get(ctx, ch.Tenant, name)
	if errors.Is(err, store.ErrNotFound) {
		return ref, nil
	}
	if err != nil {
		return nil, err
	}
	b64 := base64.StdEncoding.EncodeToString(img.Data)
	b.Set("data", rawjson.Quoted{b64})
	if _, sent := b.Fields["mimeType"]; !sent || images.Name(b64) != name {
		b.Set("mimeType", rawjson.String(img.MimeType))
	}
	return b, nil
}

// link is a signed URL of the image through the chat incarnation ch, ""
// without a linker.
func (c *Chats) link(ctx context.Context, ch chatid.Chat, name string) (string, error) {
	if c.linker == nil {
		return "", nil
	}
	return c.linker.URL(ctx, store.ImageKey(ch.Tenant, name), ch.LinkChat(), LinkTTL)
}

// legacyBlock is a content block of an entry written before messages were
// recorded, read back from its text.
type legacyBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Data      string          `json:"data,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	URL       string          `json:"url,omitempty"`
}

// legacyMessage is the pi message such an entry reads back as.
type legacyMessage struct {
	Role      string          `json:"role"`
	Kind      string          `json:"kind,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	Content   []legacyBlock   `json:"content"`
	Details   json.RawMessage `json:"details,omitempty"`
	Timestamp int64           `json:"timestamp"`
}

// legacyRef is the block of a line that is one image ref: a ref block
// (with a signed URL as ImagesAsLinks; the image inline as ImagesInline).
// As imagesExport the ref stays and named hears of it.
func (c *Chats) legacyRef(ctx context.Context, ch chatid.Chat, line string, mode ImageMode, named func(string)) (legacyBlock, error) {
	name := refs.RefName(line)
	b := legacyBlock{Type: "text", Text: &line}
	switch mode {
	case ImagesAsLinks:
		u, err := c.link(ctx, ch, name)
		if err != nil {
			return legacyBlock{}, err
		}
		b.URL = u
	case imagesExport:
		named(name)
	case ImagesInline:
		img, err := c.images.Get(ctx, ch.Tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			return b, nil
		}
		if err != nil {
			return legacyBlock{}, err
		}
		return legacyBlock{Type: "image", Name: name, MimeType: img.MimeType, Data: base64.StdEncoding.EncodeToString(img.Data)}, nil
	}
	return b, nil
}

// renderLegacy turns an entry written before messages were recorded into
// the pi message it reads back as, from its text: users' words and notes
// as user messages, assistant text and tool calls as assistant messages
// (one block each), tool results as toolResult messages. A line that is an
// image ref becomes a ref block of its own; the lines between refs are a
// text block each, and an empty one (the break around a ref) none.
func (c *Chats) renderLegacy(ctx context.Context, ch chatid.Chat, e transcript.Entry, mode ImageMode, named func(string)) (json.RawMessage, error) {
	m := legacyMessage{Timestamp: e.Date.UnixMilli()}
	text := e.Text
	switch e.Kind {
	case transcript.KindUser:
		m.Role = "user"
	case transcript.KindWork, transcript.KindNote:
		m.Role, m.Kind = "user", e.Kind
	case transcript.KindTalk:
		// One entry per assistant block: its text, or one image's ref.
		m.Role = "assistant"
		b := legacyBlock{Type: "text", Text: &text}
		if refs.RefName(text) != "" {
			var err error
			if b, err = c.legacyRef(ctx, ch, text, mode, named); err != nil {
				return nil, err
			}
		}
		m.Content = []legacyBlock{b}
		return api.Marshal(m)
	case transcript.KindTool:
		m.Role = "assistant"
		name, args, _ := strings.Cut(text, " ")
		b := legacyBlock{Type: "toolCall", Name: name}
		if json.Valid([]byte(args)) {
			b.Arguments = json.RawMessage(args)
		}
		m.Content = []legacyBlock{b}
		return api.Marshal(m)
	case transcript.KindEcho:
		m.Role = "toolResult"
		name, rest, _ := strings.Cut(text, ": ")
		m.ToolName, text = name, rest
		if e.Tool == wire.ToolZoom && e.Of >= 0 {
			// Where a logged zoom result pointed, as its details said.
			m.Details = json.RawMessage(`{"id":` + strconv.FormatInt(e.Of, 10) + `}`)
		}
	default:
		m.Role, m.Kind = "user", e.Kind
	}
	var para []string
	flush := func() {
		if p := strings.Join(para, "\n"); p != "" {
			m.Content = append(m.Content, legacyBlock{Type: "text", Text: &p})
		}
		para = nil
	}
	for _, line := range strings.Split(text, "\n") {
		if refs.RefName(line) == "" {
			para = append(para, line)
			continue
		}
		flush()
		b, err := c.legacyRef(ctx, ch, line, mode, named)
		if err != nil {
			return nil, err
		}
		m.Content = append(m.Content, b)
	}
	flush()
	if m.Content == nil {
		m.Content = []legacyBlock{}
	}
	return api.Marshal(m)
}
