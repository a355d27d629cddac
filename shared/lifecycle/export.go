package lifecycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// An export is JSONL: one line per logged message, {"seq": id of its
// first entry, "message": the pi message as the host logged it, each image
// block inline again}, in order. An image that a ref block of a message
// names comes on a line of its own, {"image": {"name", "mimeType",
// "data"}}, before the first message of the part that names it: once per
// part however often it is named, and a message naming more images than a
// part holds has them spread over the parts before its line, so a part
// stays within its budget whatever the refs. Importing an export logs the
// same messages, so exporting that chat gives the same lines.

// ExportNextHeader names the after of the export's next part; it is absent
// on the last part.
const ExportNextHeader = "Durachat-Export-Next"

// ImportAppendMessages is how many messages one import append carries.
const ImportAppendMessages = 50

// ExportLine is a message's line of an export.
type ExportLine struct {
	Seq     int64           `json:"seq"`
	Message json.RawMessage `json:"message"`
}

// ExportImage is an image's line of an export.
type ExportImage struct {
	Image ExportedImage `json:"image"`
}

// ExportedImage is an image an export carries under the name it is stored
// under.
type ExportedImage struct {
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// ExportFrom is where an export part starts: at the message after seq
// After (-1: the first), of the images whose ref blocks name the first
// Carried were carried by the part before.
type ExportFrom struct {
	After   int64
	Carried int
}

// String is the from as an export's after: the seq, then "." and the
// images carried when there are any. A part cut within the first
// message's images goes on after seq -1 ("-1.3"); ParseExportFrom reads
// back every from an export hands out.
func (f ExportFrom) String() string {
	s := strconv.FormatInt(f.After, 10)
	if f.Carried > 0 {
		s += "." + strconv.Itoa(f.Carried)
	}
	return s
}

// ParseExportFrom reads an export's after, as ExportFrom.String writes it:
// "" (the start), a seq from -1 (before the first message) to
// api.MaxSeq, then optionally "." and the images carried. A count past
// the message's images carries them all; it is not bounded by
// transcript.MaxNamedImages, which a message logged before that limit may
// pass.
func ParseExportFrom(a string) (ExportFrom, error) {
	if a == "" {
		return ExportFrom{After: -1}, nil
	}
	seq, carried, dotted := strings.Cut(a, ".")
	after, err := strconv.ParseInt(seq, 10, 64)
	n := 0
	if err == nil && dotted {
		n, err = strconv.Atoi(carried)
	}
	if err != nil || after < -1 || after > api.MaxSeq || n < 0 {
		return ExportFrom{}, api.BadRequest("after", "after must be a message seq from 0 to %d, or the %s of the part before, not %q", int64(api.MaxSeq), ExportNextHeader, a)
	}
	return ExportFrom{After: after, Carried: n}, nil
}

// Export writes the chat's export from from to w, at most about
// PageBudget bytes (at least one line), and returns where the next part
// starts, or nil when the chat ends. It holds one image at a time.
func (c *Routes) Export(ctx context.Context, tenant, chat string, from ExportFrom, w io.Writer) (*ExportFrom, error) {
	// All of one incarnation: the current one as the call starts.
	ch, _, err := c.ids.Current(ctx, tenant, chat)
	if err != nil {
		return nil, err
	}
	p := &exportPart{c: c, chat: ch, w: w, budget: PageBudget, sent: map[string]bool{}}
	err = c.eachMessage(ctx, ch, from.After+1, func(lg transcript.Logged) (bool, error) {
		skip := 0
		if lg.I == from.After+1 {
			skip = from.Carried
		}
		return p.message(ctx, lg, skip)
	})
	if err != nil {
		return nil, err
	}
	return p.next, nil
}

// exportPart is one part of an export as it is written: its lines so far
// within budget, the images it carries already, and where the next part
// starts once one does.
type exportPart struct {
	c       *Routes
	chat    chatid.Chat
	w       io.Writer
	budget  int
	written int
	sent    map[string]bool
	next    *ExportFrom
}

func (p *exportPart) write(line []byte) error {
	_, err := p.w.Write(append(line, '\n'))
	p.written += len(line) + 1
	return err
}

// message writes a logged message's line after the lines of the images
// its ref blocks name (from the skip-th, those before it being in the
// part before); more is false once the part is full.
func (p *exportPart) message(ctx context.Context, lg transcript.Logged, skip int) (more bool, err error) {
	if !lg.Erased.IsZero() {
		return true, nil // nothing of an erased message is exported
	}
	var named []string // each image the message's ref blocks name, once
	m, err := p.c.render(ctx, p.chat, lg, imagesExport, func(name string) {
		if !slices.Contains(named, name) {
			named = append(named, name)
		}
	})
	if err != nil {
		return false, err
	}
	if more, err := p.images(ctx, lg, named, skip); !more || err != nil {
		return false, err
	}
	line, err := api.Marshal(ExportLine{Seq: lg.I, Message: m})
	if err != nil {
		return false, err
	}
	if p.written > 0 && p.written+len(line)+1 > p.budget {
		// Its images are in this part; the next starts with its line.
		p.next = &ExportFrom{After: lg.I - 1, Carried: len(named)}
		return false, nil
	}
	return true, p.write(line)
}

// images writes the line of each image of named from the skip-th that
// the part does not carry yet and that is stored; more is false once the
// part is full, the next starting with the message's images from there.
func (p *exportPart) images(ctx context.Context, lg transcript.Logged, named []string, skip int) (more bool, err error) {
	for k := skip; k < len(named); k++ {
		name := named[k]
		if p.sent[name] {
			continue
		}
		info, err := p.c.images.Head(ctx, p.chat.Tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			continue // the ref names nothing stored: it stays a ref
		}
		if err != nil {
			return false, err
		}
		if p.written > 0 && p.written+imageLineSize(name, info) > p.budget {
			p.next = &ExportFrom{After: lg.I - 1, Carried: k}
			return false, nil
		}
		line, err := p.c.imageLine(ctx, p.chat.Tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if err := p.write(line); err != nil {
			return false, err
		}
		p.sent[name] = true
	}
	return true, nil
}

// imageLineSize is about the length of the line of an image of info's
// size, without reading it.
func imageLineSize(name string, info store.BlobInfo) int {
	return base64.StdEncoding.EncodedLen(int(info.Size)) + len(name) + len(info.ContentType) + 64
}

// imageLine reads a stored image into its export line.
func (c *Chats) imageLine(ctx context.Context, tenant, name string) ([]byte, error) {
	img, err := c.images.Get(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return api.Marshal(ExportImage{Image: ExportedImage{Name: name, MimeType: img.MimeType, Data: base64.StdEncoding.EncodeToString(img.Data)}})
}

func (c *Routes) handleExport(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	from, err := ParseExportFrom(r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	// Built in memory first: an error midway is still an error answer,
	// and the part is bounded by PageBudget.
	var buf bytes.Buffer
	next, err := c.Export(r.Context(), tenant, chat, from, &buf)
	if err != nil {
		return err
	}
	h := w.Header()
	api.SetDataHeaders(h, "application/x-ndjson")
	if next != nil {
		h.Set(ExportNextHeader, next.String())
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// importMessage is one message of an import file.
type importMessage struct {
	line  int
	raw   json.RawMessage
	msg   pi.Message
	place importfile.Place // where the file has it: its append's receipt names it
}

// importPlan is an import file checked whole: its image lines in chunks,
// its messages in parts, each part the messages one append logs.
type importPlan struct {
	images  [][]importImage
	appends [][]importMessage
	res     ImportResult
}

// importImage is one image line of an import file.
type importImage struct {
	line int
	images.Inline
}

// Image lines are checked, and stored, a chunk at a time: one import file
// may carry more images than one request may, and a chunk's decoded bytes
// are held until it is stored.
const (
	importChunkImages = 100
	importChunkBytes  = 8 << 20
)

// Import logs a file's items into the chat, all or nothing: every line is
// checked first (each message as its append would check it, each ref
// block for an image the tenant holds or the file carries, each image for
// its bytes) and a bad one is a 400 naming the file's line, with nothing
// written. Then the file's images are stored and its messages logged in
// order, keeping their timestamps, in appends of ImportAppendMessages
// messages whose receipts are digests of their messages and of the place
// in the file of the first (importfile.Place): running the same import
// again logs nothing twice (within the receipt window), so an import cut
// off by an outage (a 503 saying how far it got) is completed by running
// it again. Messages of pi's roles that durachat does not log (system
// messages, bash executions, custom messages, summaries) are skipped and
// counted by kind.
//
// An image keeps the name it carries only when its bytes are the name's
// (images.Incoming.Store): the name of its base64, or the tenant holds these
// very bytes under it. Otherwise (a shrunk image exported by another
// tenant or before its chat was deleted: its name is that of bytes no
// longer anywhere) it is stored under its own name and the file's refs to
// the old one are made refs to the new (ImportResult.Renamed), so a file
// can never bind a name to other bytes.
//
// A line too large for one request comes as pieces (importfile.Piece),
// each in a request of its own: they are kept until the last arrives,
// which imports the line they make.
func (c *Routes) Import(ctx context.Context, tenant, chat string, items []importfile.Item) (ImportResult, error) {
	items, skipped, done, err := c.joinLines(ctx, tenant, chat, items)
	if err != nil {
		return ImportResult{}, err
	}
	res, err := c.importItems(ctx, tenant, chat, items)
	res.Skip(skipped)
	if err == nil {
		done()
	}
	return res, err
}

// importItems is Import of items without pieces.
func (c *Routes) importItems(ctx context.Context, tenant, chat string, items []importfile.Item) (ImportResult, error) {
	p, err := c.planImport(ctx, tenant, chat, items)
	if err != nil {
		return ImportResult{}, err
	}
	res := p.res
	if res.Renamed, err = c.storeImportImages(ctx, tenant, p.images); err != nil {
		return ImportResult{}, err
	}
	// held is the chat's length before the first append: an entry id
	// below it was logged by an earlier import, one at or past it by
	// this one (a repeated append answers the ids it logged first).
	held := int64(-1)
	for _, part := range p.appends {
		msgs, receipt, err := importAppend(part, res.Renamed)
		if err != nil {
			return res, err
		}
		if held < 0 {
			if held, err = c.chatLen(ctx, tenant, chat); err != nil {
				return res, err
			}
		}
		ch, ids, err := c.log.AppendChat(ctx, tenant, chat, msgs, receipt)
		if err != nil {
			return res, stoppedAt(part, res.Entries, err)
		}
		res.Entries += len(ids)
		for _, id := range ids {
			if id >= held {
				res.New++
			}
		}
		if c.memory != nil && len(ids) > 0 {
			// The entries are durable; memory finds them on any later call.
			_ = c.memory.Appended(ctx, ch, ids[len(ids)-1]+1)
		}
	}
	return res, nil
}

// storeImportImages stores the file's images, a chunk at a time, and
// returns the names it renamed: an image stored under another name than
// the one its line carries.
func (c *Routes) storeImportImages(ctx context.Context, tenant string, chunks [][]importImage) (renamed map[string]string, err error) {
	for _, chunk := range chunks {
		// Decoded again: a file's images may be more than memory holds.
		stored, err := prepareImages(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for i, s := range stored.Store(ctx, c.images, tenant) {
			if s.Err != nil {
				return nil, fmt.Errorf("lifecycle: storing the image of line %d: %w", chunk[i].line, s.Err)
			}
			if s.Name != chunk[i].Named {
				if renamed == nil {
					renamed = map[string]string{}
				}
				renamed[chunk[i].Named] = s.Name
			}
		}
	}
	return renamed, nil
}

// importAppend is an append's messages, their refs to renamed images
// renamed, and its receipt: the digest of its first message's place in
// the file and of the messages as the file has them after renaming, so
// importing the file again repeats it, and the same messages at another
// place of the file are another append.
func importAppend(part []importMessage, renamed map[string]string) (msgs []pi.Message, receipt string, err error) {
	msgs = make([]pi.Message, len(part))
	h := sha256.New()
	fmt.Fprintf(h, "%q %d\n", part[0].place.File, part[0].place.Line)
	for i, m := range part {
		if raw, ok := importfile.RenameRefs(m.raw, renamed); ok {
			if err := json.Unmarshal(raw, &m.msg); err != nil {
				return nil, "", err
			}
			m.raw = raw
		}
		msgs[i] = m.msg
		h.Write(m.raw)
		h.Write([]byte{'\n'})
	}
	return msgs, "import/" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// chatLen is the length of the chat's current incarnation.
func (c *Routes) chatLen(ctx context.Context, tenant, chat string) (int64, error) {
	cur, _, err := c.ids.Current(ctx, tenant, chat)
	if err != nil {
		return 0, err
	}
	return c.log.Len(ctx, cur)
}

// MaxImportLine bounds a line an import puts back together from its
// pieces: twice the body limit, more than any message the API takes.
const MaxImportLine = 2 * api.MaxBody

// maxPieces bounds the pieces of one line.
const maxPieces = 1024

// joinLines replaces the pieces among items by the lines they make: a
// piece is kept under the chat's texts (deleted with the chat) until the
// last of its line arrives, which gives the line, checked against the
// digest its pieces name. done deletes the pieces used, once the import
// of their lines succeeded; until then a retry of the last piece puts
// its line together again.
func (c *Chats) joinLines(ctx context.Context, tenant, chat string, items []importfile.Item) (out []importfile.Item, skipped importfile.Skipped, done func(), err error) {
	var used []func() error
	done = func() {
		for _, drop := range used {
			if err := drop(); err != nil {
				// Left under the chat's texts, deleted with it.
				api.Logger(ctx).Warn("import: the pieces of a line were not deleted", "err", err)
			}
		}
	}
	out = make([]importfile.Item, 0, len(items))
	for _, it := range items {
		if it.Piece == nil {
			out = append(out, it)
			continue
		}
		line, drop, err := c.joinPieces(ctx, tenant, chat, it)
		if err != nil {
			return nil, nil, nil, err
		}
		if line == nil {
			continue // more pieces to come
		}
		used = append(used, drop)
		whole, n, err := importfile.Parse(bytes.NewReader(line))
		if err == nil && (len(whole)+n.Total() != 1 || len(whole) == 1 && whole[0].Piece != nil) {
			err = errors.New("they do not make one message or image line")
		}
		if err != nil {
			return nil, nil, nil, errors.Join(drop(), lineError(it.Line, "piece", "the line its pieces make: %v", err))
		}
		skipped = merge(skipped, n)
		for _, w := range whole {
			w.Line = it.Line
			out = append(out, w)
		}
	}
	return out, skipped, done, nil
}

// merge adds the counts of b to a, made when nil.
func merge(a, b importfile.Skipped) importfile.Skipped {
	for k, n := range b {
		if a == nil {
			a = importfile.Skipped{}
		}
		a[k] += n
	}
	return a
}

// joinPieces keeps a piece of a line too large for one import request
// and, when it is the last, returns the whole line and a func deleting its
// pieces. nil: more pieces are to come.
func (c *Chats) joinPieces(ctx context.Context, tenant, chat string, it importfile.Item) ([]byte, func() error, error) {
	var p importfile.Piece
	if err := json.Unmarshal(it.Piece, &p); err != nil {
		return nil, nil, lineError(it.Line, "piece", "a piece is {\"piece\": {\"line\", \"index\", \"count\", \"data\"}}: %v", err)
	}
	if sum, err := hex.DecodeString(p.Line); err != nil || len(sum) != sha256.Size {
		return nil, nil, lineError(it.Line, "piece.line", "a piece's line is the hex SHA-256 of the whole line, not %q", p.Line)
	}
	if p.Count < 1 || p.Count > maxPieces || p.Index < 0 || p.Index >= p.Count || len(p.Data) == 0 {
		return nil, nil, lineError(it.Line, "piece", "piece %d of %d: a line has 1 to %d pieces, each with data", p.Index, p.Count, maxPieces)
	}
	ch, err := c.importChat(ctx, tenant, chat)
	if err != nil {
		return nil, nil, err
	}
	key := func(i int) string {
		return fmt.Sprintf("%simport/%s/%04d", ch.TextPrefix(), p.Line, i)
	}
	if err := c.blobs.Put(ctx, key(p.Index), store.Blob{ContentType: "application/octet-stream", Data: p.Data}); err != nil {
		return nil, nil, fmt.Errorf("lifecycle: keeping piece %d of an import line: %w", p.Index, err)
	}
	if p.Index < p.Count-1 {
		return nil, nil, nil
	}
	drop := func() error {
		for i := range p.Count {
			if err := c.blobs.Delete(ctx, key(i)); err != nil {
				return fmt.Errorf("lifecycle: deleting piece %d of an import line: %w", i, err)
			}
		}
		return nil
	}
	var line bytes.Buffer
	for i := range p.Count {
		b, err := c.blobs.Get(ctx, key(i))
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, lineError(it.Line, "piece", "piece %d of the line has not arrived: send a line's pieces in order", i)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("lifecycle: reading piece %d of an import line: %w", i, err)
		}
		if line.Len()+len(b.Data) > MaxImportLine {
			return nil, nil, errors.Join(drop(), &fault.Error{Code: fault.TooLarge, Field: fmt.Sprintf("line %d", it.Line),
				Message: fmt.Sprintf("line %d: a line put together from pieces is at most %d bytes", it.Line, MaxImportLine)})
		}
		line.Write(b.Data)
	}
	if sum := sha256.Sum256(line.Bytes()); hex.EncodeToString(sum[:]) != p.Line {
		// Dropped, so the line can be sent again whole.
		return nil, nil, errors.Join(drop(), lineError(it.Line, "piece", "the pieces do not make the line they name (SHA-256 %s); send them again", p.Line))
	}
	return line.Bytes(), drop, nil
}

// importChat is the incarnation of the chat that an import's pieces are
// kept under: the chat's, opened as the import's first append would open
// it (refused while the chat is being deleted), and the chat listed, so
// deleting it deletes pieces that never made a line.
func (c *Chats) importChat(ctx context.Context, tenant, chat string) (chatid.Chat, error) {
	r, err := c.touch(ctx, tenant, chat)
	return r.id.Chat, err
}

// planImport checks every item of an import file, writing nothing.
func (c *Chats) planImport(ctx context.Context, tenant, chat string, items []importfile.Item) (*importPlan, error) {
	if r, err := c.load(ctx, tenant, chat); err != nil {
		return nil, err
	} else if r.state.Deleting != 0 {
		return nil, deletingError(chat)
	}
	p := &importPlan{}
	carried, err := p.planImages(items)
	if err != nil {
		return nil, err
	}
	for _, chunk := range p.images {
		if _, err := prepareImages(ctx, chunk); err != nil {
			return nil, err
		}
	}
	if err := p.planAppends(items); err != nil {
		return nil, err
	}
	for _, part := range p.appends {
		if err := c.checkAppend(ctx, tenant, part, carried); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// planImages reads the file's image lines into chunks of at most
// importChunkImages images and about importChunkBytes, and returns the
// names the file carries.
func (p *importPlan) planImages(items []importfile.Item) (carried map[string]bool, err error) {
	carried = map[string]bool{}
	var chunk []importImage
	size := 0
	for _, it := range items {
		if it.Image == nil {
			continue
		}
		img, err := importedImage(it)
		if err != nil {
			return nil, err
		}
		if len(chunk) == importChunkImages || (len(chunk) > 0 && size+len(img.Data) > importChunkBytes) {
			p.images, chunk, size = append(p.images, chunk), nil, 0
		}
		chunk = append(chunk, importImage{line: it.Line, Inline: images.Inline{B64: img.Data, Named: img.Name, Field: lineField(it.Line, "image.data")}})
		size += len(img.Data)
		carried[img.Name] = true
	}
	if len(chunk) > 0 {
		p.images = append(p.images, chunk)
	}
	return carried, nil
}

// importedImage reads an image line: a valid name and some data.
func importedImage(it importfile.Item) (ExportedImage, error) {
	var img ExportedImage
	if err := json.Unmarshal(it.Image, &img); err != nil {
		return img, lineError(it.Line, "image", "an image line is {\"image\": {\"name\", \"mimeType\", \"data\"}}: %v", err)
	}
	if !refs.ValidName(img.Name) {
		return img, lineError(it.Line, "image.name", "%q is not an image name (%d lowercase hex digits)", img.Name, refs.NameLen)
	}
	if img.Data == "" {
		return img, lineError(it.Line, "image.data", "an image line needs its base64 data")
	}
	return img, nil
}

// planAppends reads the file's messages into parts of at most
// ImportAppendMessages messages naming at most transcript.MaxNamedImages
// images, one append each, skipping the roles the transcript does not
// keep.
func (p *importPlan) planAppends(items []importfile.Item) error {
	var part []importMessage
	var named transcript.NamedImages // by the append: one names at most transcript.MaxNamedImages
	for _, it := range items {
		if it.Message == nil {
			continue
		}
		var peek struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(it.Message, &peek) == nil && importfile.Unlogged(peek.Role) {
			// Read before the message: its other fields need not be a
			// logged message's.
			p.res.Skip(map[string]int{"message/" + peek.Role: 1})
			continue
		}
		p.res.Messages++
		m := importMessage{line: it.Line, raw: it.Message, place: it.Place}
		if m.place == (importfile.Place{}) {
			m.place.Line = it.Line // items read by the caller, its lines
		}
		if err := json.Unmarshal(it.Message, &m.msg); err != nil {
			if fe, ok := errors.AsType[*fault.Error](err); ok {
				return lineError(it.Line, "message."+fe.Field, "%s", fe.Message)
			}
			return lineError(it.Line, "message", "is not a pi message: %v", err)
		}
		named.Add(m.msg)
		if len(part) > 0 && named.Count() > transcript.MaxNamedImages {
			// With this message the append would name too many images: it
			// starts the next one.
			p.appends = append(p.appends, part)
			part, named = nil, transcript.NamedImages{}
			named.Add(m.msg)
		}
		part = append(part, m)
		if len(part) == ImportAppendMessages {
			p.appends = append(p.appends, part)
			part, named = nil, transcript.NamedImages{}
		}
	}
	if len(part) > 0 {
		p.appends = append(p.appends, part)
	}
	return nil
}

// prepareImages checks and prepares a chunk of image lines; a refused
// image is a 400 naming its line.
func prepareImages(ctx context.Context, chunk []importImage) (*images.Incoming, error) {
	inline := make([]images.Inline, len(chunk))
	for i, im := range chunk {
		inline[i] = im.Inline
	}
	return images.Prepare(ctx, inline)
}

// checkAppend refuses what the append of part would refuse, naming the
// file's line: its messages, their inline images, and ref blocks naming
// an image that is neither stored (nor waiting as an upload) nor carried
// by the file.
func (c *Chats) checkAppend(ctx context.Context, tenant string, part []importMessage, carried map[string]bool) error {
	msgs := make([]pi.Message, len(part))
	var inline []images.Inline
	type ref struct{ msg, block int }
	var refsAt []ref
	var names []string
	for i, m := range part {
		msgs[i] = m.msg
		for j, b := range m.msg.Content.Blocks {
			switch {
			case b.Type == pi.TypeImage && b.Data != "":
				inline = append(inline, images.Inline{B64: b.Data, Named: b.Name, Field: lineField(m.line, fmt.Sprintf("message.content[%d].data", j))})
			case b.Type == pi.TypeText && (m.msg.Role == pi.RoleUser || m.msg.Role == pi.RoleToolResult):
				if name := refs.RefName(b.Text); name != "" && !carried[name] {
					refsAt = append(refsAt, ref{i, j})
					names = append(names, name)
				}
			}
		}
	}
	if err := transcript.Check(msgs); err != nil {
		return appendError(part, err)
	}
	if len(inline) > 0 {
		// Decoded here and again by the append: a bad image must refuse
		// the file before its first append.
		if _, err := images.Prepare(ctx, inline); err != nil {
			return err
		}
	}
	found := make([]error, len(names))
	var mu sync.Mutex
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	err := inParallel(ctx, idx, func(ctx context.Context, i int) error {
		_, err := c.images.Locate(ctx, tenant, names[i])
		if err != nil && !images.Refused(err) {
			return err
		}
		mu.Lock()
		found[i] = err
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for i, err := range found {
		if err != nil {
			r := refsAt[i]
			return lineError(part[r.msg].line, fmt.Sprintf("message.content[%d]", r.block), "%s does not name an image the tenant holds or the file carries", refs.Ref(names[i]))
		}
	}
	return nil
}

// lineError is a 400 naming a field of a line of an import file
// (lineField).
func lineError(line int, field, format string, args ...any) *fault.Error {
	f := lineField(line, field)
	return api.BadRequest(f, "%s: %s", f, fmt.Sprintf(format, args...))
}

// lineField names a field of a line of an import file: "line N" and the
// field's path within the line.
func lineField(line int, field string) string {
	f := fmt.Sprintf("line %d", line)
	if field != "" {
		f += " " + field
	}
	return f
}

// appendField is a field of an append's input: messages[i] and the path in it.
var appendField = regexp.MustCompile(`^messages\[(\d+)\](.*)$`)

// appendError names, in what an append refuses of its input (a bad request
// or a conflict naming a field of it), the file's line of the message at
// fault; any other error is passed on.
func appendError(part []importMessage, err error) error {
	fe, ok := errors.AsType[*fault.Error](err)
	if !ok || (fe.Code != fault.BadRequest && fe.Code != fault.Conflict) {
		return err
	}
	line, path := part[0].line, ""
	if m := appendField.FindStringSubmatch(fe.Field); m != nil {
		if i, _ := strconv.Atoi(m[1]); i < len(part) {
			line, path = part[i].line, "message"+m[2]
		}
	}
	// What is wrong, after the append's "field: " and before its cause.
	return lineError(line, path, "%s", strings.TrimPrefix(fe.Message, fe.Field+": "))
}

// stoppedAt is the answer to an import whose append of part failed after
// entries were logged: an outage says how far the import got and that
// running it again completes it; a refusal the check did not foresee
// names its line and what is logged.
func stoppedAt(part []importMessage, entries int, err error) error {
	where := fmt.Sprintf("the messages before line %d are logged (%d entries); importing the same file again logs the rest and nothing twice", part[0].line, entries)
	if store.IsOutage(err) {
		e := api.Unavailable(err)
		e.Message += ": " + where
		return e
	}
	if ae := appendError(part, err); ae != err {
		e := api.AsError(ae)
		e.Message += " (" + where + ")"
		return e
	}
	return fmt.Errorf("lifecycle: import stopped at line %d: %w", part[0].line, err)
}

func (c *Routes) handleImport(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, api.MaxBody)
	items, skipped, err := importfile.Parse(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &fault.Error{Code: fault.TooLarge, Message: fmt.Sprintf("an import part is at most %d bytes; send a large file in parts", api.MaxBody)}
		}
		if fe, ok := errors.AsType[*importfile.FormatError](err); ok {
			return lineError(fe.Line, "", "%s", fe.What())
		}
		return api.BadRequest("", "the body must be an export or a pi session file (JSONL): %v", err)
	}
	res, err := c.Import(r.Context(), tenant, chat, items)
	if err != nil {
		return err
	}
	res.Skip(skipped)
	api.WriteJSON(w, http.StatusOK, res)
	return nil
}
