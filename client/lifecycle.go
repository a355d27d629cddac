package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/client/wire"
)

// Chats lists the tenant's chats in id order with GET /v1/chats: those
// after the chat id after ("" from the start), at most limit (1-100; 0
// lets the server choose).
func (c *Client) Chats(ctx context.Context, after string, limit int) (*wire.ChatList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.ChatList
	if err := c.call(ctx, call{method: http.MethodGet, path: "/v1/chats", query: q, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StoredMessage is one logged message read back as the host logged it:
// image blocks as their refs (text blocks "[image <name>]"), carrying a
// signed URL when read with links. Seq is the id of its first entry.
type StoredMessage struct {
	Seq     int64   `json:"seq"`
	Message Message `json:"message"`
	// Raw is the message's JSON as read back, with every field it was
	// logged with, those Message does not name (usage, signatures, a
	// host's own) included.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the message's JSON in Raw as well.
func (s *StoredMessage) UnmarshalJSON(b []byte) error {
	var w struct {
		Seq     int64           `json:"seq"`
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = StoredMessage{Seq: w.Seq, Raw: w.Message}
	if len(w.Message) == 0 {
		return nil
	}
	return json.Unmarshal(w.Message, &s.Message)
}

// MessagePage is a page of a chat's messages; Next is "" on the last page.
type MessagePage struct {
	Messages []StoredMessage `json:"messages"`
	Next     string          `json:"next"`
}

// ReadOptions page through a chat with Messages.
type ReadOptions struct {
	// After is the Next of the previous page ("" from the start).
	After string
	// Limit is at most 100; 0 lets the server choose.
	Limit int
	// Links gives each image ref a signed URL.
	Links bool
}

// Messages reads the chat back in order with GET .../messages. Pages
// stay stable while the chat is appended to: seqs never move.
func (ch *Chat) Messages(ctx context.Context, o ReadOptions) (*MessagePage, error) {
	q := url.Values{}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Links {
		q.Set("images", "links")
	}
	var out MessagePage
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/messages"), query: q, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Deletion is the answer of Delete.
type Deletion struct {
	Chat    string `json:"chat"`
	Deleted bool   `json:"deleted"`
	// Accepted is set when the server answered 202: the deletion goes on
	// in the background; Chats shows its progress, and Delete may be
	// called again (it resumes).
	Accepted bool                `json:"-"`
	Progress wire.DeleteProgress `json:"progress"`
}

// Delete deletes the chat with DELETE /v1/chats/{chat}: its messages,
// memory and state, and the images no other chat of the tenant names. It
// is idempotent; once done, the id names a new, empty chat.
func (ch *Chat) Delete(ctx context.Context) (*Deletion, error) {
	var out Deletion
	if err := ch.c.call(ctx, call{method: http.MethodDelete, path: ch.path(""), retry: true}, &out); err != nil {
		return nil, err
	}
	out.Accepted = !out.Deleted
	return &out, nil
}

// Export writes the chat's export to w: JSONL, one line per logged
// message, {"seq", "message"}, each as the host logged it with its image
// blocks inline, and the images its ref blocks name on lines of their
// own, {"image": {"name", "mimeType", "data"}}. It follows the export's
// parts (GET .../export) until the last.
func (ch *Chat) Export(ctx context.Context, w io.Writer) error {
	after := ""
	for {
		q := url.Values{}
		if after != "" {
			q.Set("after", after)
		}
		resp, err := ch.c.send(ctx, call{method: http.MethodGet, path: ch.path("/export"), query: q, retry: true})
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
			resp.Body.Close()
			return apiError(resp, data)
		}
		_, err = io.Copy(w, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("durachat: exporting %s: %w", ch.id, err)
		}
		if after = resp.Header.Get("Durachat-Export-Next"); after == "" {
			return nil
		}
	}
}

// importPart bounds the body of one import request, under Lambda's 6 MB.
const importPart = 4 << 20

// Import loads an export, a pi coding-agent session file, a Codex CLI
// rollout or a Claude Code session into the chat with POST .../import: r
// is read whole here; ImportFile reads a file of any size a line at a
// time.
func (ch *Chat) Import(ctx context.Context, r io.Reader) (*wire.ImportResult, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("durachat: import: %w", err)
	}
	return ch.ImportFile(ctx, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, nil)
}

// ImportFile loads a file into the chat with POST .../import, reading it
// a line at a time (open opens it; it is read twice, importfile.Read), so
// memory holds a part, whatever the file's size. The file is read here (a
// session's last branch, another host's messages as pi messages) and sent
// in parts of whole lines under Lambda's 6 MB, each logged all or
// nothing. Order and timestamps are kept, images are stored as they go,
// and importing the same file again logs nothing twice (each append's
// receipt is the digest of its messages and of its first message's place
// in the file, each line sent naming its place), so an import that fails or is killed midway (the error
// names the file's line and how far it got) is completed by importing the
// file again. progress, when set, is told after each part how many of
// the file's bytes are imported.
func (ch *Chat) ImportFile(ctx context.Context, open func() (io.ReadCloser, error), progress func(done int64)) (*wire.ImportResult, error) {
	im := &importer{ch: ch, total: &wire.ImportResult{}, progress: progress}
	skipped, err := importfile.Read(open, func(it importfile.Item) error {
		if it.Message != nil {
			// A part's refs follow the images earlier parts renamed.
			it.Message, _ = importfile.RenameRefs(it.Message, im.total.Renamed)
		}
		line, err := importLine(it)
		if err != nil {
			return err
		}
		if err := im.add(ctx, line, it.Line); err != nil {
			return err
		}
		im.end = it.End
		return nil
	})
	if err == nil {
		err = im.send(ctx)
	}
	var apiErr *Error
	if err != nil && !errors.As(err, &apiErr) {
		err = fmt.Errorf("durachat: import: %w", err)
	}
	im.total.Skip(skipped)
	return im.total, err
}

// importer sends an import's lines in parts of at most importPart bytes
// and adds up what each part imported.
type importer struct {
	ch    *Chat
	total *wire.ImportResult
	part  bytes.Buffer
	lines []int // the file's line of each line of the part
	// end is how many of the file's bytes the part holds the lines of.
	end      int64
	progress func(done int64)
}

// add puts the line of the file's line fileLine in the part, sending the
// part first when the line does not fit; a line too large for one request
// goes in pieces, one a request, in order, the last importing the line.
func (im *importer) add(ctx context.Context, line []byte, fileLine int) error {
	if im.part.Len() > 0 && im.part.Len()+len(line)+1 > importPart {
		if err := im.send(ctx); err != nil {
			return err
		}
	}
	if len(line)+1 <= importPart {
		im.put(line, fileLine)
		return nil
	}
	pieces, err := importfile.Cut(line, importPiece)
	if err != nil {
		return err
	}
	for _, p := range pieces {
		im.put(p, fileLine)
		if err := im.send(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) put(line []byte, fileLine int) {
	im.part.Write(line)
	im.part.WriteByte('\n')
	im.lines = append(im.lines, fileLine)
}

// importLine is an item's line on its own: an image line a message names
// may go in an earlier part, which stores it first.
func importLine(it importfile.Item) ([]byte, error) {
	switch {
	case it.Image != nil:
		return json.Marshal(struct {
			Image json.RawMessage `json:"image"`
		}{it.Image})
	case it.Piece != nil:
		return json.Marshal(struct {
			Piece json.RawMessage `json:"piece"`
		}{it.Piece})
	}
	// The message's place in the file: the server's place of a part's
	// line would be its line in the part.
	return json.Marshal(struct {
		Type    string           `json:"type"`
		Message json.RawMessage  `json:"message"`
		At      importfile.Place `json:"at"`
	}{"message", it.Message, it.Place})
}

// send imports the part, if it holds any line, and adds what it imported
// to the total.
func (im *importer) send(ctx context.Context) error {
	if im.part.Len() == 0 {
		return nil
	}
	var got wire.ImportResult
	err := im.ch.c.call(ctx, call{method: http.MethodPost, path: im.ch.path("/import"), raw: im.part.Bytes(), retry: true}, &got)
	if err != nil {
		return partError(err, im.lines, im.total)
	}
	im.total.Add(got)
	im.part.Reset()
	im.lines = im.lines[:0]
	if im.progress != nil {
		im.progress(im.end)
	}
	return nil
}

// importPiece is how much of a line too large for one import request one
// piece carries: 3 MiB, 4 MiB as base64.
const importPiece = 3 << 20

// partLine is a line number in an import's answer.
var partLine = regexp.MustCompile(`\bline (\d+)\b`)

// partError makes the lines an import part's error names the file's lines
// (the part's line n is the file's lines[n-1]) and says what the parts
// before it logged.
func partError(err error, lines []int, done *wire.ImportResult) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	fileLine := func(s string) string {
		return partLine.ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.Atoi(partLine.FindStringSubmatch(m)[1])
			if n < 1 || n > len(lines) {
				return m
			}
			return "line " + strconv.Itoa(lines[n-1])
		})
	}
	e.Field, e.Message = fileLine(e.Field), fileLine(e.Message)
	if done.Entries > 0 || done.Messages > 0 {
		e.Message += fmt.Sprintf(" (the file's lines before line %d are imported: %d entries)", lines[0], done.Entries)
	}
	return e
}

// Retention reads the tenant's default retention (GET /v1/retention).
func (c *Client) Retention(ctx context.Context) (*wire.Retention, error) {
	var out wire.Retention
	if err := c.call(ctx, call{method: http.MethodGet, path: "/v1/retention", retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetRetention sets the tenant's default retention in days (0: keep).
func (c *Client) SetRetention(ctx context.Context, days int) (*wire.Retention, error) {
	var out wire.Retention
	if err := c.call(ctx, call{method: http.MethodPut, path: "/v1/retention", body: map[string]int{"days": days}, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Retention reads the chat's retention: its own, or its tenant's.
func (ch *Chat) Retention(ctx context.Context) (*wire.Retention, error) {
	var out wire.Retention
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/retention"), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetRetention sets the chat's own retention in days (0 keeps the chat);
// nil returns it to its tenant's default.
func (ch *Chat) SetRetention(ctx context.Context, days *int) (*wire.Retention, error) {
	var out wire.Retention
	body := map[string]*int{"days": days}
	if err := ch.c.call(ctx, call{method: http.MethodPut, path: ch.path("/retention"), body: body, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Erase erases messages of the chat with POST /v1/chats/{chat}/erase:
// those req names (by seq, by literal match, or by the images they show)
// become tombstones in their place, the summary lines built from them are
// hidden at once and rebuilt, and their images are deleted unless a live
// message of the tenant names them. The same request again answers the
// same erasure; Done is false while the rebuild goes on (Erasure tells
// when it is done).
func (ch *Chat) Erase(ctx context.Context, req wire.EraseRequest) (*wire.Erasure, error) {
	var out wire.Erasure
	if err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/erase"), body: req, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Erasure reads the receipt of one of the chat's erasures, with GET
// /v1/chats/{chat}/erasures/{id}.
func (ch *Chat) Erasure(ctx context.Context, id string) (*wire.Erasure, error) {
	var out wire.Erasure
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/erasures/" + url.PathEscape(id)), retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
