package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
)

// Limits from memory's log rules, counted in characters (runes).
const (
	// PieceChars is the most characters one user, talk, work or note entry
	// holds; longer text is logged as several entries, so each opens whole
	// with one zoom.
	PieceChars = 25000
	// EchoChars is the most characters of an echo before it is capped
	// (head and tail kept, plus the refs of the cut middle).
	EchoChars = 30000
)

// inputErr is bad input, a bad request named by its JSON path in the
// append request ("messages[2].content[1].data"), which its message starts
// with. Nothing is written when one is returned.
func inputErr(field, format string, args ...any) *fault.Error {
	return &fault.Error{Code: fault.BadRequest, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// refusedBy is inputErr for input that err refused; the caller is told err
// too.
func refusedBy(field, what string, err error) *fault.Error {
	e := inputErr(field, "%s", what)
	e.Err = err
	return e
}

// draft is an entry before it has an id.
type draft struct {
	Kind string
	Text string
	Tool string
	Of   int64
	// Date is the message's own timestamp; zero means the append's date.
	Date time.Time
	// Record is, on a message's first entry, the message as logged; Cont
	// marks the message's later entries.
	Record *Record
	Cont   bool
}

// imageRef locates one image block of the request.
type imageRef struct {
	msg, block int
}

// drafts turns checked messages whose images are stored (names: the
// name of each image block stored, by its position) into drafts.
func drafts(msgs []pi.Message, names map[imageRef]string) ([]draft, error) {
	var out []draft
	for i, m := range msgs {
		ds := messageDrafts(i, m, names)
		rec, err := makeRecord(m, imageNames(i, m, names))
		if err != nil {
			return nil, refusedBy(fmt.Sprintf("messages[%d]", i), "cannot be recorded", err)
		}
		ds[0].Record = rec
		for k := range ds[1:] {
			ds[k+1].Cont = true
		}
		out = append(out, ds...)
	}
	return out, nil
}

// imageNames lists the names the image blocks of message i are stored
// under, in order: those putImages stored, and the names a zoom result's
// blocks carry already.
func imageNames(i int, m pi.Message, names map[imageRef]string) []string {
	var out []string
	for j, b := range m.Content.Blocks {
		if b.Type != pi.TypeImage {
			continue
		}
		name, ok := names[imageRef{i, j}]
		if !ok {
			name = storedName(b)
		}
		out = append(out, name)
	}
	return out
}

// checkMessages refuses what cannot be logged, before anything is stored.
func checkMessages(msgs []pi.Message) error {
	if len(msgs) == 0 {
		return inputErr("messages", "at least one message is required")
	}
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		// The log records the message as sent (pi.Message.Raw), so its
		// bytes must be JSON text: a body's are checked as it is read
		// (api.ReadBody), a message of an import file or a tool call here.
		if err := api.CheckUTF8(field, m.Raw); err != nil {
			return err
		}
		switch m.Kind {
		case "", KindWork, KindNote:
		default:
			return inputErr(field+".kind", "%q is not a log kind a message may carry (work or note)", m.Kind)
		}
		switch m.Role {
		case pi.RoleUser, pi.RoleAssistant:
		case pi.RoleToolResult:
			if m.ToolName == "" {
				return inputErr(field+".toolName", "a toolResult message needs the name of its tool")
			}
		case "":
			return inputErr(field+".role", "is required")
		default:
			return inputErr(field+".role", "%q is not user, assistant or toolResult", m.Role)
		}
		// An assistant message may say nothing: pi records a failed or
		// aborted turn as one with no content.
		if m.Role != pi.RoleAssistant && isEmpty(m.Content) {
			return inputErr(field+".content", "is empty: a message needs at least one block with something in it")
		}
		for j, b := range m.Content.Blocks {
			bf := fmt.Sprintf("%s.content[%d]", field, j)
			switch b.Type {
			case pi.TypeText:
			case pi.TypeImage:
				if b.Data == "" {
					return inputErr(bf+".data", "an image block needs its base64 data")
				}
			case pi.TypeThinking:
			case pi.TypeToolCall:
				if m.Role != pi.RoleAssistant {
					return inputErr(bf+".type", "a toolCall block belongs in an assistant message, not %s", m.Role)
				}
				if b.Name == "" {
					return inputErr(bf+".name", "a toolCall block needs the tool's name")
				}
				if len(b.Arguments) > 0 && !json.Valid(b.Arguments) {
					return inputErr(bf+".arguments", "must be JSON")
				}
			default:
				return inputErr(bf+".type", "%q is not a block type (text, image, toolCall, thinking)", b.Type)
			}
		}
	}
	if !namesAtMost(msgs, MaxNamedImages) {
		return inputErr("messages", "name more than %d distinct images; an append may name at most %d (split it)", MaxNamedImages, MaxNamedImages)
	}
	return nil
}

// Check refuses what an append would refuse for msgs alone, with the same
// bad-request *fault.Error, reading and storing nothing: a caller that logs several
// appends checks them all before the first.
func Check(msgs []pi.Message) error { return checkMessages(msgs) }

// MaxNamedImages bounds the distinct images one append names (refs in its
// text and arguments, and its image blocks): each is tracked for the
// chat's deletion with a few store calls, so a message of nothing but refs
// must not cost thousands of writes. No legitimate message comes near it.
const MaxNamedImages = 1000

// namesAtMost reports whether msgs name at most n distinct images,
// counting each image block as one.
func namesAtMost(msgs []pi.Message, n int) bool {
	var named NamedImages
	for _, m := range msgs {
		if named.Add(m); named.Count() > n {
			return false
		}
	}
	return true
}

// NamedImages counts the images messages name toward MaxNamedImages: the
// distinct refs in their text and tool-call arguments, and each image
// block. The zero value counts none.
type NamedImages struct {
	refs   map[string]bool
	blocks int
}

// Add counts the images m names.
func (n *NamedImages) Add(m pi.Message) {
	if n.refs == nil {
		n.refs = map[string]bool{}
	}
	for _, b := range m.Content.Blocks {
		var text string
		switch b.Type {
		case pi.TypeText:
			text = b.Text
		case pi.TypeToolCall:
			text = string(b.Arguments)
		case pi.TypeImage:
			n.blocks++
		}
		for _, name := range refs.Names(text) {
			n.refs[name] = true
		}
	}
}

// Count is how many images the messages added so far name.
func (n *NamedImages) Count() int { return len(n.refs) + n.blocks }

// isEmpty reports whether content has no blocks, or only empty text.
func isEmpty(c pi.Content) bool {
	for _, b := range c.Blocks {
		if b.Type != pi.TypeText || b.Text != "" {
			return false
		}
	}
	return true
}

// imageError names the block of an image the images package refused; a
// store failure is passed on as it is.
func imageError(field string, err error) error {
	switch {
	case errors.Is(err, images.ErrInvalidBase64):
		return refusedBy(field, "is not valid base64", err)
	case errors.Is(err, images.ErrUnsupported):
		return refusedBy(field, "is not a whole PNG, JPEG, GIF or WebP image", err)
	case errors.Is(err, images.ErrTooLarge):
		return refusedBy(field, "is an image too large to store", err)
	}
	return fmt.Errorf("transcript: storing image %s: %w", field, err)
}

// storedName is the name an image block is stored under: the name it
// carries (a zoom result's images keep theirs), else the name of its data.
func storedName(b pi.Block) string {
	if refs.ValidName(b.Name) {
		return b.Name
	}
	return images.Name(b.Data)
}

// zoomPageNames returns, for a zoom result, the image names its page text
// names; nil for any other message.
func zoomPageNames(m pi.Message) map[string]bool {
	if m.Role != pi.RoleToolResult || m.ToolName != wire.ToolZoom || m.Kind != "" {
		return nil
	}
	named := map[string]bool{}
	for _, b := range m.Content.Blocks {
		if b.Type == pi.TypeText && refs.RefName(b.Text) == "" {
			for _, n := range refs.Names(b.Text) {
				named[n] = true
			}
		}
	}
	return named
}

// messageDrafts converts one checked message whose images are stored:
// at least one draft, so every message has an entry to be read back from.
func messageDrafts(i int, m pi.Message, names map[imageRef]string) []draft {
	date := messageDate(m)
	switch {
	case m.Kind != "":
		return pieces(m.Kind, joined(i, m, names, nil), date)
	case m.Role == pi.RoleUser:
		return pieces(KindUser, joined(i, m, names, nil), date)
	case m.Role == pi.RoleAssistant:
		var out []draft
		for j, b := range m.Content.Blocks {
			switch b.Type {
			case pi.TypeText:
				if b.Text != "" {
					out = append(out, pieces(KindTalk, b.Text, date)...)
				}
			case pi.TypeImage:
				out = append(out, draft{Kind: KindTalk, Text: refs.Ref(names[imageRef{i, j}]), Of: -1, Date: date})
			case pi.TypeToolCall:
				out = append(out, draft{Kind: KindTool, Text: b.Name + " " + compactArgs(b.Arguments), Of: -1, Date: date})
			}
		}
		if len(out) == 0 {
			// Only thinking, or nothing (an error stop): an empty talk
			// entry keeps the message's place in the log.
			out = pieces(KindTalk, "", date)
		}
		return out
	default: // tool result
		d := draft{Kind: KindEcho, Of: -1, Date: date}
		switch m.ToolName {
		case wire.ToolZoom:
			d.Tool, d.Of = wire.ToolZoom, zoomedID(m)
		case wire.ToolSearch, wire.ToolDate:
			d.Tool = m.ToolName
		}
		d.Text = capEcho(m.ToolName + ": " + joined(i, m, names, zoomPageNames(m)))
		return []draft{d}
	}
}

// joined is a message's text blocks and image refs, one per line.
// Thinking is never logged. In a zoom result, refs and images its page
// already names add nothing, so its logged text is the same with or
// without offload.
func joined(i int, m pi.Message, names map[imageRef]string, pageNames map[string]bool) string {
	// One part (a message of one text) is itself, not a copy; more are
	// joined into one buffer of their length.
	var parts []string
	add := func(s string) { parts = append(parts, s) }
	for j, b := range m.Content.Blocks {
		switch b.Type {
		case pi.TypeText:
			if n := refs.RefName(b.Text); n != "" && pageNames[n] {
				continue
			}
			add(b.Text)
		case pi.TypeImage:
			name, stored := names[imageRef{i, j}]
			if !stored {
				name = storedName(b) // a zoom result's, its page names it
			}
			if pageNames[name] {
				continue
			}
			add(refs.Ref(name))
		}
	}
	return strings.Join(parts, "\n")
}

// compactArgs is a tool call's arguments as compact JSON ("{}" when absent).
func compactArgs(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw) // checked valid before; kept as sent if not
	}
	return buf.String()
}

// messageDate is pi's "timestamp" (Unix milliseconds), or zero.
func messageDate(m pi.Message) time.Time {
	raw, ok := m.Extra["timestamp"]
	if !ok {
		return time.Time{}
	}
	var ms float64
	if json.Unmarshal(raw, &ms) != nil || ms <= 0 || ms > 1e15 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// zoomedID is the id a zoom result opened, from its details {"id": n}, or -1.
func zoomedID(m pi.Message) int64 {
	raw, ok := m.Extra["details"]
	if !ok {
		return -1
	}
	var d struct {
		ID *float64 `json:"id"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ID == nil || *d.ID < 0 || *d.ID != float64(int64(*d.ID)) {
		return -1
	}
	return int64(*d.ID)
}

// pieces splits text into entries of at most PieceChars characters.
func pieces(kind, text string, date time.Time) []draft {
	var out []draft
	for _, p := range splitText(text, PieceChars) {
		out = append(out, draft{Kind: kind, Text: p, Of: -1, Date: date})
	}
	return out
}

// splitText cuts text into parts of at most max characters, never inside a
// rune and never inside a ref (the cut moves to before it).
func splitText(text string, max int) []string {
	var out []string
	// Each pass reads only the part it cuts off: counting the runes of
	// what is left each time made a 12 MiB text take seconds.
	for {
		at := byteOffset(text, max)
		if at == len(text) {
			return append(out, text)
		}
		cut := refSafe(text, at, false)
		if cut == 0 { // cannot happen for max >= refs.RefLen; never loop forever
			cut = at
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
}

// byteOffset is the byte offset of the n-th rune of s (len(s) past the end).
func byteOffset(s string, n int) int {
	for off := range s {
		if n == 0 {
			return off
		}
		n--
	}
	return len(s)
}

// refSafe moves a cut at byte offset cut out of a ref it would split:
// before the ref, or after it when forward is set.
func refSafe(s string, cut int, forward bool) int {
	lo := max(0, cut-refs.RefLen+1)
	for start := lo; start < cut; start++ {
		if start+refs.RefLen > len(s) {
			break
		}
		if s[start] == '[' && refs.RefName(s[start:start+refs.RefLen]) != "" && start+refs.RefLen > cut {
			if forward {
				return start + refs.RefLen
			}
			return start
		}
	}
	return cut
}

// capEcho caps an echo over EchoChars characters: head and tail kept around
// a notice of how many characters were left out, and each ref named only in
// the cut middle listed on its own line after the capped text, so no image
// is lost (spec requirement 15).
func capEcho(text string) string { return capText(text, EchoChars) }

// capText is capEcho for a limit of limit characters (limit > 2*64).
func capText(text string, limit int) string {
	total := utf8.RuneCountInString(text)
	if total <= limit {
		return text
	}
	const noticeRoom = 64 // the notice is far shorter than this
	keep := limit - noticeRoom
	head := refSafe(text, byteOffset(text, keep/2), false)
	tail := refSafe(text, byteOffset(text, total-(keep-keep/2)), true)
	middle := text[head:tail]
	var sb strings.Builder
	sb.Grow(head + 64 + len(text) - tail)
	sb.WriteString(text[:head])
	fmt.Fprintf(&sb, "\n[... %d characters omitted ...]\n", utf8.RuneCountInString(middle))
	sb.WriteString(text[tail:])
	kept := map[string]bool{}
	for _, n := range refs.Names(text[:head]) {
		kept[n] = true
	}
	for _, n := range refs.Names(text[tail:]) {
		kept[n] = true
	}
	for _, n := range refs.Names(middle) {
		if !kept[n] {
			sb.WriteByte('\n')
			sb.WriteString(refs.Ref(n))
		}
	}
	return sb.String()
}
