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
	"slices"
	"strconv"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/api"
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
// "data"}}, before the first message of the part that names it. Importing
// an export logs the same messages, so exporting that chat gives the same
// lines.

// ExportNextHeader names the after of the export's next part; it is absent
// on the last part.
const ExportNextHeader = "Durachat-Export-Next"

// ImportBatch is how many messages one import append carries.
const ImportBatch = 50

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

// Export writes the chat's messages from seq from as export lines to w, at
// most about budget bytes (at least one message, with the images its ref
// blocks name), and returns the after of the next part, or -1 when the
// chat ends.
func (c *Chats) Export(ctx context.Context, tenant, chat string, from int64, w io.Writer, budget int) (int64, error) {
	written, next := 0, int64(-1)
	sent := map[string]bool{} // images this part carries already
	imgs := images.New(c.blobs)
	err := c.eachMessage(ctx, tenant, chat, from, func(lg transcript.Logged) (bool, error) {
		var named []string
		m, err := c.render(ctx, tenant, lg, imagesExport, func(name string) {
			if !sent[name] && !slices.Contains(named, name) {
				named = append(named, name)
			}
		})
		if err != nil {
			return false, err
		}
		var lines [][]byte
		size := 0
		for _, name := range named {
			img, err := imgs.Get(ctx, tenant, name)
			if errors.Is(err, store.ErrNotFound) {
				continue // the ref names nothing stored: it stays a ref
			}
			if err != nil {
				return false, err
			}
			line, err := api.Marshal(ExportImage{Image: ExportedImage{Name: name, MimeType: img.MimeType, Data: base64.StdEncoding.EncodeToString(img.Data)}})
			if err != nil {
				return false, err
			}
			lines = append(lines, line)
			size += len(line) + 1
		}
		line, err := api.Marshal(ExportLine{Seq: lg.I, Message: m})
		if err != nil {
			return false, err
		}
		lines = append(lines, line)
		size += len(line) + 1
		if written > 0 && written+size > budget {
			next = lg.I - 1
			return false, nil
		}
		for _, line := range lines {
			if _, err := w.Write(append(line, '\n')); err != nil {
				return false, err
			}
		}
		for _, name := range named {
			sent[name] = true
		}
		written += size
		return true, nil
	})
	if err != nil {
		return -1, err
	}
	return next, nil
}

func (c *Chats) handleExport(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	from, err := fromSeq(r)
	if err != nil {
		return err
	}
	// Built in memory first: an error midway is still an error answer,
	// and the part is bounded by PageBudget.
	var buf bytes.Buffer
	next, err := c.Export(r.Context(), tenant, chat, from, &buf, PageBudget)
	if err != nil {
		return err
	}
	h := w.Header()
	api.SetDataHeaders(h, "application/x-ndjson")
	if next >= 0 {
		h.Set(ExportNextHeader, strconv.FormatInt(next, 10))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// Import logs the messages of items into the chat in order, keeping their
// timestamps, in appends of ImportBatch messages whose receipts are
// digests of their messages: running the same import again logs nothing
// twice (within the receipt window). Messages whose role durachat does
// not log (a session's bash executions, custom messages) are skipped. An
// image an export carries, on its own line or as an image block with the
// name it was stored under, is stored under that name when the tenant
// does not hold it yet, so its refs read the same.
func (c *Chats) Import(ctx context.Context, tenant, chat string, items []importfile.Item) (ImportResult, error) {
	var res ImportResult
	var batch []pi.Message
	var named transcript.NamedImages // by the batch: an append names at most transcript.MaxNamedImages
	h := sha256.New()
	// held is the chat's length before the first append: an entry id
	// below it was logged by an earlier import, one at or past it by
	// this one (a repeated append answers the ids it logged first).
	held := int64(-1)
	flush := func() error {
		named = transcript.NamedImages{}
		if len(batch) == 0 {
			return nil
		}
		if held < 0 {
			n, err := c.log.Len(ctx, tenant, chat)
			if err != nil {
				return err
			}
			held = n
		}
		receipt := "import/" + hex.EncodeToString(h.Sum(nil)[:16])
		ids, err := c.log.Append(ctx, tenant, chat, batch, receipt)
		if err != nil {
			return err
		}
		res.Entries += len(ids)
		for _, id := range ids {
			if id >= held {
				res.New++
			}
		}
		if c.memory != nil && len(ids) > 0 {
			// The entries are durable; memory finds them on any later call.
			_ = c.memory.Appended(ctx, tenant, chat, ids[len(ids)-1]+1)
		}
		batch = batch[:0]
		h.Reset()
		return nil
	}
	imgs := images.New(c.blobs)
	for i, it := range items {
		if it.Image != nil {
			var img ExportedImage
			if err := json.Unmarshal(it.Image, &img); err != nil || !refs.ValidName(img.Name) || img.Data == "" {
				return res, api.BadRequest(fmt.Sprintf("line %d", it.Line), "line %d: an image line is {\"image\": {\"name\", \"mimeType\", \"data\"}} with a stored image's name", it.Line)
			}
			if err := keepName(ctx, imgs, tenant, pi.Block{Type: pi.TypeImage, Name: img.Name, Data: img.Data, MimeType: img.MimeType}); err != nil {
				return res, err
			}
			continue
		}
		res.Messages++
		raw := it.Message
		var m pi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return res, api.BadRequest(fmt.Sprintf("messages[%d]", i), "message %d is not a pi message: %v", i, err)
		}
		switch m.Role {
		case pi.RoleUser, pi.RoleAssistant, pi.RoleToolResult:
		default:
			res.Skipped++
			continue
		}
		for _, b := range m.Content.Blocks {
			if b.Type == pi.TypeImage && refs.ValidName(b.Name) && b.Data != "" {
				if err := keepName(ctx, imgs, tenant, b); err != nil {
					return res, err
				}
			}
		}
		named.Add(m)
		if len(batch) > 0 && named.Count() > transcript.MaxNamedImages {
			// With this message the append would name too many images: it
			// starts the next one.
			if err := flush(); err != nil {
				return res, err
			}
			named.Add(m)
		}
		batch = append(batch, m)
		h.Write(raw)
		h.Write([]byte{'\n'})
		if len(batch) == ImportBatch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// keepName stores an exported image under the name it carries, unless the
// tenant holds that name already or the bytes would be shrunk (then they
// are not the stored ones, and the append names them as any other image).
func keepName(ctx context.Context, imgs *images.Store, tenant string, b pi.Block) error {
	if _, err := imgs.Head(ctx, tenant, b.Name); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	p, err := images.Shrink(ctx, b.Data)
	if store.IsOutage(err) {
		return err // the decode budget is busy: the import may be retried
	}
	if err != nil || p.Shrunk {
		return nil // the append refuses or renames it, naming the block
	}
	p.Name = b.Name
	return imgs.PutPrepared(ctx, tenant, p)
}

func (c *Chats) handleImport(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, api.MaxBody)
	items, skipped, err := importfile.Parse(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("an import part is at most %d bytes; send a large file in parts", api.MaxBody)}
		}
		return api.BadRequest("", "the body must be an export or a pi session file (JSONL): %v", err)
	}
	res, err := c.Import(r.Context(), tenant, chat, items)
	if err != nil {
		var ie *transcript.InputError
		if errors.As(err, &ie) {
			return api.BadRequest(ie.Field, "%s", ie.Error())
		}
		return err
	}
	res.Skipped += skipped
	api.WriteJSON(w, http.StatusOK, res)
	return nil
}
