package transcript

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// row is an entry as stored. Short field names keep rows small.
type row struct {
	Kind string `json:"k"`
	Text string `json:"t,omitempty"`
	// TextKey names the blob holding Text when it was too big for the row.
	TextKey string `json:"tk,omitempty"`
	Date    int64  `json:"d"` // Unix milliseconds
	Receipt string `json:"r"`
	// Pos is the entry's place in its append and N the append's size: a
	// row tells where its append ends, which is how probes find the log's end.
	Pos  int    `json:"p,omitempty"`
	N    int    `json:"n"`
	Tool string `json:"tool,omitempty"`
	Of   *int64 `json:"of,omitempty"` // nil is -1
	// Rec is the message this entry starts, as logged, or RecKey the blob
	// holding it when it was too big for the row; Cont marks a later
	// entry of a message. Rows written before messages were recorded have
	// none of them, and read back from their text.
	Rec    *Record `json:"m,omitempty"`
	RecKey string  `json:"mk,omitempty"`
	Cont   bool    `json:"c,omitempty"`
	// Erased is when the entry was erased (Unix ms): the row is a
	// tombstone holding only its place (kind, date, append), no content.
	Erased int64 `json:"x,omitempty"`
}

// end is the id after the last entry of the row's append, given its id.
func (r row) end(id int64) int64 { return id - int64(r.Pos) + int64(r.N) }

func (r row) valid() bool { return r.N >= 1 && r.Pos >= 0 && r.Pos < r.N && r.Kind != "" }

// record is r/<receipt>: an append's intent, enough to finish it.
type record struct {
	Receipt string `json:"r"`
	First   int64  `json:"f"`
	N       int    `json:"n"`
	Date    int64  `json:"d"`
	Digest  string `json:"h"`
	// Request is requestDigest of the messages as received; empty in
	// records written before it was kept.
	Request string `json:"q,omitempty"`
	// Rest holds the rows after the first, or RestKey the blob holding them.
	Rest    []row  `json:"rest,omitempty"`
	RestKey string `json:"rk,omitempty"`
	// made are the rows RestKey holds as the append that wrote them made
	// them (never stored; nil in a record read back), so it writes them
	// without reading them back.
	made []row
}

// sameRequest reports whether the record was opened for the request whose
// digest is req. A record written before request digests were kept cannot
// tell and accepts, keeping the older rule: once claimed it answers its ids
// to any request; before that only its entry digest is compared.
func (r record) sameRequest(req string) bool {
	return r.Request == "" || r.Request == req
}

func (r record) ids() []int64 {
	ids := make([]int64, r.N)
	for k := range ids {
		ids[k] = r.First + int64(k)
	}
	return ids
}

// fits reports whether an item with this body stays within the budget.
func fits(pk, sk string, body []byte) bool {
	return store.Item{Key: store.Key{PK: pk, SK: sk}, Version: 1, Body: body}.Size() <= store.ItemBudget
}

// checked builds an item and refuses it when over budget: the last check
// before every write.
func checked(pk, sk string, body []byte) (store.Item, error) {
	it := store.Item{Key: store.Key{PK: pk, SK: sk}, Body: body}
	if s := it.Size(); s > store.ItemBudget {
		return it, fmt.Errorf("transcript: row %s is %d bytes, budget %d: %w", sk, s, store.ItemBudget, store.ErrTooLarge)
	}
	return it, nil
}

// ReceiptWindow is how long an append's receipt record is kept: a retry
// within it is recognized and logs nothing twice; after it the table's TTL
// drops the record, and the same receipt appends its messages again. An
// append cut off before all its rows were written is completed from the
// record by the next read or retry within the window.
const ReceiptWindow = 7 * 24 * time.Hour

// recordItem is a receipt record's row, expiring ReceiptWindow from now.
// The table's TTL compares with the wall clock, so this reads it too, not
// the log's clock.
func recordItem(pk, sk string, body []byte) (store.Item, error) {
	it, err := checked(pk, sk, body)
	it.Expires = time.Now().Add(ReceiptWindow).Unix()
	return it, err
}

// draftRow is the row of a draft, the pos-th of the n entries of an
// append under receipt, dated date unless the message has its own.
func draftRow(d draft, date time.Time, receipt string, pos, n int) row {
	r := row{Kind: d.Kind, Text: d.Text, Date: date.UnixMilli(), Receipt: receipt, Pos: pos, N: n, Tool: d.Tool, Rec: d.Record, Cont: d.Cont}
	if !d.Date.IsZero() {
		r.Date = d.Date.UnixMilli()
	}
	if d.Of >= 0 {
		of := d.Of
		r.Of = &of
	}
	return r
}

// makeRow is the stored form of r (draftRow) and its body. What is too big
// for a row goes to a blob first: the message's record, then the entry's
// text.
func (l *Log) makeRow(ctx context.Context, texts, pk string, r row) (row, []byte, error) {
	// A body is longer than its text and record: when they alone are over
	// the budget, the row is not encoded whole only to find it does not fit.
	if len(r.Text)+r.Rec.size() <= store.ItemBudget {
		body, err := rawjson.Of(r)
		if err != nil {
			return row{}, nil, err
		}
		if fits(pk, store.EntrySK(0), body) {
			return r, body, nil
		}
	}
	if r.Rec != nil {
		rec, err := r.Rec.encoded()
		if err != nil {
			return row{}, nil, err
		}
		key := store.TextKey(texts, rec)
		if err := l.blobs.Put(ctx, key, store.Blob{ContentType: "application/json", Data: rec}); err != nil {
			return row{}, nil, fmt.Errorf("transcript: moving a %d-byte message record out of its row: %w", len(rec), err)
		}
		r.Rec, r.RecKey = nil, key
		if len(r.Text) <= store.ItemBudget {
			body, err := rawjson.Of(r)
			if err != nil {
				return row{}, nil, err
			}
			if fits(pk, store.EntrySK(0), body) {
				return r, body, nil
			}
		}
	}
	text := []byte(r.Text)
	key := store.TextKey(texts, text)
	if err := l.blobs.Put(ctx, key, store.Blob{ContentType: "text/plain; charset=utf-8", Data: text}); err != nil {
		return row{}, nil, fmt.Errorf("transcript: moving a %d-byte text out of its row: %w", len(r.Text), err)
	}
	r.Text, r.TextKey = "", key
	body, err := rawjson.Of(r)
	if err != nil {
		return row{}, nil, err
	}
	return r, body, nil
}

// size is the length of the record's JSON (0 for none): less than its
// encoding.
func (r *Record) size() int {
	if r == nil {
		return 0
	}
	return len(r.JSON)
}

// rowList is the JSON list of rows, as rawjson.Of of the list writes it,
// joined from their bodies (rawjson.Of of each) as they are made, in one
// buffer sized for the drafts' texts: not the rows encoded again, nor a
// body kept apart from it.
type rowList struct{ json []byte }

// restList is an empty rowList with room for the rows of drafts.
func restList(drafts []draft, receipt string) rowList {
	n := 2
	for _, d := range drafts {
		// A row's JSON is its text (escapes aside) and under 200 bytes
		// of field names and numbers.
		n += len(d.Text) + len(d.Kind) + len(d.Tool) + len(receipt) + 200
	}
	return rowList{json: make([]byte, 0, n)}
}

// add appends a row's body.
func (l rowList) add(body []byte) rowList {
	if len(l.json) > 0 {
		l.json = append(l.json, ',')
	} else {
		l.json = append(l.json, '[')
	}
	l.json = append(l.json, body...)
	return l
}

// done is the list's JSON: null for no rows.
func (l rowList) done() rawjson.Value {
	if len(l.json) == 0 {
		return rawjson.Value("null")
	}
	return append(l.json, ']')
}

// decodeRow reads an entry row.
func decodeRow(it store.Item) (row, error) {
	var r row
	if err := json.Unmarshal(it.Body, &r); err != nil {
		return row{}, fmt.Errorf("transcript: row %s: %w", it.SK, err)
	}
	if !r.valid() {
		return row{}, fmt.Errorf("transcript: row %s is malformed (pos %d of %d, kind %q)", it.SK, r.Pos, r.N, r.Kind)
	}
	return r, nil
}

// entry turns a stored row into an Entry, reading a moved text back.
func (l *Log) entry(ctx context.Context, id int64, r row) (Entry, error) {
	e := Entry{I: id, Kind: r.Kind, Text: r.Text, Date: time.UnixMilli(r.Date).UTC(), Receipt: r.Receipt, Tool: r.Tool, Of: -1}
	if r.Of != nil {
		e.Of = *r.Of
	}
	if r.Erased != 0 {
		e.Erased = time.UnixMilli(r.Erased).UTC()
		e.Text = ErasedText(e.Erased)
		return e, nil
	}
	if r.TextKey != "" {
		b, err := l.blobs.Get(ctx, r.TextKey)
		if errors.Is(err, store.ErrNotFound) {
			return Entry{}, fmt.Errorf("transcript: entry %d: its text %s is missing: %w", id, r.TextKey, errLost)
		}
		if err != nil {
			return Entry{}, fmt.Errorf("transcript: entry %d: reading its text: %w", id, err)
		}
		e.Text = string(b.Data)
	}
	return e, nil
}

// errLost marks data a row names that is gone; it is not store.ErrNotFound,
// which callers read as "past the end".
var errLost = errors.New("stored data missing")

// digest identifies an append's content, so a receipt reused for other
// messages is told apart from a retry. Dates from the request count;
// the append's date does not (twins pick it independently).
func digest(ds []draft) string {
	h := sha256.New()
	var buf []byte
	for _, d := range ds {
		var ms int64
		if !d.Date.IsZero() {
			ms = d.Date.UnixMilli()
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\x00%d\x00", d.Kind, len(d.Text), d.Tool, d.Of, ms)
		buf = writeString(h, buf, d.Text)
		if d.Record != nil {
			// Added to what rows written before records were kept hash, so a
			// append without one hashes as it did.
			fmt.Fprintf(h, "\x00m%d\x00%q\x00", len(d.Record.JSON), d.Record.Images)
			h.Write(d.Record.JSON)
		}
		if d.Cont {
			h.Write([]byte("\x00c"))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// requestDigest identifies an append's messages as received, so a receipt
// reused for another request is refused even after its append completed,
// when comparing entries would mean converting (and storing images) again.
// Each message is hashed as its JSON, one line each, with every value that
// can be large (texts, image data, raw fields) replaced by its own hash:
// encoding/json rescans a value once per level of nesting, and this way the
// large bytes are read once. encoding/json sorts the keys of the maps pi
// marshals through and raw values are compacted, so the same messages hash
// the same whatever whitespace or key order they came with (objects nested
// in raw values keep their key order).
func requestDigest(msgs []pi.Message) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		d, err := digestForm(m)
		if err == nil {
			err = enc.Encode(d)
		}
		if err != nil {
			return "", refusedBy(field, "does not encode as JSON", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// digestForm is a copy of m with its large values replaced by their hashes.
func digestForm(m pi.Message) (pi.Message, error) {
	var err error
	if m.Extra, err = hashRaws(m.Extra); err != nil {
		return pi.Message{}, err
	}
	blocks := make([]pi.Block, len(m.Content.Blocks))
	for j, b := range m.Content.Blocks {
		b.Text, b.Data, b.Thinking = hashText(b.Text), hashText(b.Data), hashText(b.Thinking)
		if b.Arguments, err = hashRaw(b.Arguments); err != nil {
			return pi.Message{}, err
		}
		if b.Extra, err = hashRaws(b.Extra); err != nil {
			return pi.Message{}, err
		}
		blocks[j] = b
	}
	if m.Content.Blocks != nil {
		m.Content.Blocks = blocks
	}
	return m, nil
}

// hashText is the hex sha256 of a non-empty s. Empty stays empty, so a
// field pi leaves out when empty stays out; a hash is never empty.
func hashText(s string) string {
	if s == "" {
		return ""
	}
	h := sha256.New()
	writeString(h, nil, s)
	return hex.EncodeToString(h.Sum(nil))
}

// writeString writes s to h a piece at a time through buf (made or grown
// as needed, up to 32 KiB, and returned for the next call):
// h.Write([]byte(s)) would copy a large text whole first.
func writeString(h hash.Hash, buf []byte, s string) []byte {
	if want := min(len(s), 32<<10); len(buf) < want {
		buf = make([]byte, want)
	}
	for len(s) > 0 {
		n := copy(buf, s)
		h.Write(buf[:n])
		s = s[n:]
	}
	return buf
}

// hashRaw is the hash of a raw JSON value's compact form, as a JSON string.
func hashRaw(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 {
		return v, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return json.RawMessage(`"` + hex.EncodeToString(sum[:]) + `"`), nil
}

// hashRaws is a copy of m with each value hashed by hashRaw.
func hashRaws(m map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		h, err := hashRaw(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = h
	}
	return out, nil
}
