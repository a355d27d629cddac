package lifecycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/importfile"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// An export is JSONL: one line per log entry, {"seq": id, "message": pi
// message}, in order, each image inline as an image block carrying its
// data, its MIME type and the name it is stored under. Importing an export
// into an empty chat logs the same entries, so exporting that chat gives
// the same bytes.

// ExportNextHeader names the after of the export's next part; it is absent
// on the last part.
const ExportNextHeader = "Durachat-Export-Next"

// ImportBatch is how many messages one import append carries.
const ImportBatch = 50

// ExportLine is one line of an export.
type ExportLine struct {
	Seq     int64           `json:"seq"`
	Message json.RawMessage `json:"message"`
}

// Export writes the chat's entries from seq from as export lines to w, at
// most about budget bytes (at least one line), and returns the after of
// the next part, or -1 when the chat ends.
func (c *Chats) Export(ctx context.Context, tenant, chat string, from int64, w io.Writer, budget int) (int64, error) {
	written, next := 0, int64(-1)
	err := c.eachEntry(ctx, tenant, chat, from, func(e transcript.Entry) (bool, error) {
		m, err := c.render(ctx, tenant, e, asInline)
		if err != nil {
			return false, err
		}
		line, err := api.Marshal(ExportLine{Seq: e.I, Message: m})
		if err != nil {
			return false, err
		}
		if written > 0 && written+len(line)+1 > budget {
			next = e.I - 1
			return false, nil
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return false, err
		}
		written += len(line)
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

// Import logs msgs into the chat in order, keeping their timestamps, in
// appends of ImportBatch messages whose receipts are digests of their
// messages: running the same import again logs nothing twice (within the
// receipt window). Messages whose role durachat does not log (a session's
// bash executions, custom messages) are skipped. An image block that
// carries the name it was stored under in an export is stored under that
// name when the tenant does not hold it yet, so its refs read the same.
func (c *Chats) Import(ctx context.Context, tenant, chat string, raws []json.RawMessage) (ImportResult, error) {
	res := ImportResult{Messages: len(raws)}
	var batch []pi.Message
	var named transcript.NamedImages // by the batch: an append names at most transcript.MaxNamedImages
	h := sha256.New()
	flush := func() error {
		named = transcript.NamedImages{}
		if len(batch) == 0 {
			return nil
		}
		receipt := "import/" + hex.EncodeToString(h.Sum(nil)[:16])
		ids, err := c.log.Append(ctx, tenant, chat, batch, receipt)
		if err != nil {
			return err
		}
		res.Entries += len(ids)
		if c.memory != nil && len(ids) > 0 {
			// The entries are durable; memory finds them on any later call.
			_ = c.memory.Appended(ctx, tenant, chat, ids[len(ids)-1]+1)
		}
		batch = batch[:0]
		h.Reset()
		return nil
	}
	imgs := images.New(c.blobs)
	for i, raw := range raws {
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
	msgs, skipped, err := importfile.Parse(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("an import part is at most %d bytes; send a large file in parts", api.MaxBody)}
		}
		return api.BadRequest("", "the body must be an export or a pi session file (JSONL): %v", err)
	}
	res, err := c.Import(r.Context(), tenant, chat, msgs)
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
