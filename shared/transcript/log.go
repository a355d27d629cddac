package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// MaxReceiptBytes bounds a receipt.
const MaxReceiptBytes = 256

const (
	// claimAttempts bounds how often an append tries for the next id
	// before it gives up as contended (a 503: the caller retries).
	claimAttempts = 64
	// rowWriteConcurrency bounds the parallel row writes of one append.
	rowWriteConcurrency = 8
	// queryPage is how many rows a read asks for at once.
	queryPage = 100
)

var (
	// ErrReceiptConflict: the receipt was used for an append of other
	// messages. A receipt names one request; it never stands for another.
	ErrReceiptConflict = errors.New("receipt already used for different messages")

	errContended = errors.New("too many concurrent appends to this chat")
	errCorrupt   = errors.New("log rows contradict each other")
)

// Chats admits each append and holds the images it names
// (lifecycle.Chats.Hold, the one order of every writer of images for a
// chat): it may refuse the append (a chat being deleted), opens the
// chat's incarnation the entries go to (chatid.Registry.Open), records
// that the chat names the images, and once no deletion of them is in
// flight runs store, which stores and claims them; it returns the
// incarnation.
//
// Deleted is asked by an append that found a row or record of its own
// gone: a deletion of the incarnation removes them under it. It returns
// the append's refusal (a *fault.Error, fault.Deleting) when the
// incarnation c is being deleted or has been, and nil when c is still its
// chat's and not being deleted (then the log contradicts itself).
type Chats interface {
	Hold(ctx context.Context, tenant, chat string, names []string, store func(context.Context) error) (chatid.Chat, error)
	Deleted(ctx context.Context, c chatid.Chat) error
}

// Log is the transcript of every chat of every tenant over one table.
type Log struct {
	table store.Table
	blobs store.Blobs
	imgs  *images.Store
	now   func() time.Time
	chats Chats
	ids   *chatid.Registry
}

// Config wires a Log. Table, Blobs and Images are required.
type Config struct {
	// Table keeps the entries; Blobs the text too large for a row;
	// Images the images the messages carry.
	Table  store.Table
	Blobs  store.Blobs
	Images *images.Store
	// Chats, when set, hears of every append before it writes entries;
	// nil admits every append into the chat's current incarnation.
	Chats Chats
	// Now dates entries whose message has no timestamp (time.Now when nil).
	Now func() time.Time
}

// New returns the log cfg describes.
func New(cfg Config) *Log {
	l := &Log{table: cfg.Table, blobs: cfg.Blobs, imgs: cfg.Images, now: cfg.Now, chats: cfg.Chats, ids: chatid.New(cfg.Table)}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Append is AppendChat for a caller that needs only the ids.
func (l *Log) Append(ctx context.Context, tenant, chat string, msgs []pi.Message, receipt string) ([]int64, error) {
	_, ids, err := l.AppendChat(ctx, tenant, chat, msgs, receipt)
	return ids, err
}

// AppendChat logs msgs as entries of the chat and returns the incarnation
// they went to and their ids, in order.
// receipt makes it idempotent: the same messages again under it return the
// same ids and write nothing new; other messages under it are an
// conflict (a *fault.Error) wrapping ErrReceiptConflict. See the package
// comment for how a crash or a racing twin is handled. Bad input is a bad
// request (a *fault.Error naming the field); an outage wraps
// store.ErrUnavailable.
func (l *Log) AppendChat(ctx context.Context, tenant, chat string, msgs []pi.Message, receipt string) (chatid.Chat, []int64, error) {
	req, err := checkAppend(tenant, chat, msgs, receipt)
	if err != nil {
		return chatid.Chat{}, nil, err
	}
	cur, recorded, err := l.ids.Current(ctx, tenant, chat)
	if err != nil {
		return chatid.Chat{}, nil, err
	}
	a := l.startAppend(cur, receipt)
	ids, err := a.retried(ctx, req)
	if err != nil {
		return chatid.Chat{}, nil, l.vanished(ctx, cur, err)
	}
	if ids != nil {
		return cur, ids, nil
	}

	imgs, err := l.prepare(ctx, tenant, msgs)
	if err != nil {
		return chatid.Chat{}, nil, err
	}
	c, drafts, err := l.opening(ctx, cur, recorded, imgs)
	if err != nil {
		return chatid.Chat{}, nil, err
	}
	if c != cur {
		// The chat was opened (its first append) or deleted and opened
		// again since the receipt was looked up: it is looked up again
		// in the incarnation the entries go to.
		a = l.startAppend(c, receipt)
		if ids, err = a.retried(ctx, req); err != nil {
			return chatid.Chat{}, nil, l.vanished(ctx, c, err)
		}
		if ids != nil {
			return c, ids, nil
		}
	}
	if ids, err = a.write(ctx, drafts, req); err != nil {
		return chatid.Chat{}, nil, l.vanished(ctx, c, err)
	}
	return c, ids, nil
}

// vanished is the answer to an append to the incarnation c that failed
// with err. An append that found a row or record of its own gone (err is
// errCorrupt or errLost) has met the deletion of c, when one is under way
// or done: it is refused as an append the deletion came first to (409
// deleting; a retry goes to the chat the id names next). What it wrote is
// the deleted incarnation's, which the deletion, or the sweep after it,
// removes. Otherwise err stands.
func (l *Log) vanished(ctx context.Context, c chatid.Chat, err error) error {
	if l.chats == nil || !errors.Is(err, errCorrupt) && !errors.Is(err, errLost) {
		return err
	}
	if refused := l.chats.Deleted(ctx, c); refused != nil {
		return refused
	}
	return err
}

// checkAppend checks an append's input and returns the digest of its
// request.
func checkAppend(tenant, chat string, msgs []pi.Message, receipt string) (req string, err error) {
	if tenant == "" || chat == "" {
		return "", errors.New("transcript: append needs a tenant and a chat")
	}
	if err := checkReceipt(receipt); err != nil {
		return "", err
	}
	if err := checkMessages(msgs); err != nil {
		return "", err
	}
	return requestDigest(msgs)
}

// write writes the append's entries: it opens the append's record unless
// retried found it (a twin may open it first: then its record comes
// back), checks that the record is of these entries, claims the first
// row and finishes.
func (a *pendingAppend) write(ctx context.Context, drafts []draft, req string) ([]int64, error) {
	rec, version := a.rec, a.version
	sum := digest(drafts)
	var err error
	if !a.found {
		if rec, version, err = a.open(ctx, drafts, sum, req); err != nil {
			return nil, err
		}
	}
	// The entries must match too: only they say what the claim row and
	// the record's rest will hold, and a record may predate req.
	if !rec.sameRequest(req) || rec.Digest != sum {
		return nil, a.conflict()
	}
	first, _, err := a.l.makeRow(ctx, a.texts, a.pk, draftRow(drafts[0], time.UnixMilli(rec.Date), a.receipt, 0, rec.N))
	if err != nil {
		return nil, err
	}
	if rec, err = a.claim(ctx, rec, version, first); err != nil {
		return nil, err
	}
	// Its other rows are written without looking for them first: none is
	// there unless a twin wrote it, and writeRow checks a row it finds.
	return a.finish(ctx, rec, map[int64]row{})
}

// opening has Chats (when set) admit the append and hold its images
// before it stores them, and returns the incarnation its entries go to
// and the entries, which name what was stored. Without Chats (nothing
// deletes a chat) the log opens the incarnation itself when the id has
// none, and an incarnation recorded stays current.
func (l *Log) opening(ctx context.Context, cur chatid.Chat, recorded bool, imgs *appendImages) (chatid.Chat, []draft, error) {
	var names map[imageRef]string
	storeImages := func(ctx context.Context) (err error) {
		names, err = imgs.store(ctx)
		return err
	}
	c := cur
	var err error
	if l.chats != nil {
		c, err = l.chats.Hold(ctx, cur.Tenant, cur.ID, imgs.names(), storeImages)
	} else if err = storeImages(ctx); err == nil && !recorded {
		c, err = l.ids.Open(ctx, cur.Tenant, cur.ID)
	}
	if err != nil {
		return chatid.Chat{}, nil, err
	}
	ds, err := drafts(imgs.msgs, names)
	return c, ds, err
}

// startAppend starts an append to the incarnation c under receipt.
func (l *Log) startAppend(c chatid.Chat, receipt string) *pendingAppend {
	return &pendingAppend{l: l, pk: c.PK(), texts: c.TextPrefix(), receipt: receipt, rk: store.ReceiptSK(receipt)}
}

// retried looks up the append's record (a.rec; a.found when it exists). When the
// receipt names another request it answers the conflict; when the append
// happened already (maybe partly) it finishes it from the record and
// returns its ids. It is asked before anything else, so a retry is
// answered without converting (and storing images) again.
func (a *pendingAppend) retried(ctx context.Context, req string) (ids []int64, err error) {
	a.rec, a.version, a.found, err = a.getRecord(ctx)
	if err != nil || !a.found {
		return nil, err
	}
	if !a.rec.sameRequest(req) {
		return nil, a.conflict()
	}
	claimed, err := a.claimed(ctx, a.rec)
	if err != nil || !claimed {
		return nil, err
	}
	return a.finish(ctx, a.rec, nil)
}

func checkReceipt(receipt string) error {
	switch {
	case receipt == "":
		return inputErr("receipt", "is required: an idempotency key that a retry of this append repeats")
	case len(receipt) > MaxReceiptBytes:
		return inputErr("receipt", "is %d bytes, at most %d", len(receipt), MaxReceiptBytes)
	case !utf8.ValidString(receipt):
		return inputErr("receipt", "is not valid UTF-8")
	}
	for _, r := range receipt {
		if unicode.IsControl(r) {
			return inputErr("receipt", "contains a control character")
		}
	}
	return nil
}

// pendingAppend is one append in progress: its receipt and where its rows go.
type pendingAppend struct {
	l       *Log
	pk      string
	texts   string // the incarnation's text prefix
	receipt string
	rk      string
	// rec is the append's record as retried read it, at version; found
	// says it exists.
	rec     record
	version int64
	found   bool
}

func (a *pendingAppend) conflict() error {
	return &fault.Error{Code: fault.Conflict, Field: "receipt", Message: fmt.Sprintf("receipt: %q was used for an earlier append of other messages", a.receipt), Err: ErrReceiptConflict}
}

// getRecord reads the append's record, if any.
func (a *pendingAppend) getRecord(ctx context.Context) (record, int64, bool, error) {
	it, err := a.l.table.Get(ctx, store.Key{PK: a.pk, SK: a.rk})
	if errors.Is(err, store.ErrNotFound) {
		return record{}, 0, false, nil
	}
	if err != nil {
		return record{}, 0, false, fmt.Errorf("transcript: reading receipt: %w", err)
	}
	var rec record
	if err := json.Unmarshal(it.Body, &rec); err != nil || rec.N < 1 || rec.Receipt != a.receipt {
		return record{}, 0, false, fmt.Errorf("transcript: receipt record %s is malformed: %w", a.rk, errCorrupt)
	}
	return rec, it.Version, true, nil
}

// claimed reports whether the record's first id holds this append's claim.
func (a *pendingAppend) claimed(ctx context.Context, rec record) (bool, error) {
	it, err := a.l.table.Get(ctx, store.Key{PK: a.pk, SK: store.EntrySK(rec.First)})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("transcript: reading entry %d: %w", rec.First, err)
	}
	r, err := decodeRow(it)
	if err != nil {
		return false, err
	}
	return r.Receipt == a.receipt && r.Pos == 0, nil
}

// open writes the append's record: the intent that lets anyone finish it.
// When a twin wrote it first, its record is returned instead.
func (a *pendingAppend) open(ctx context.Context, drafts []draft, sum, req string) (record, int64, error) {
	l := a.l
	date := l.now()
	rec := record{Receipt: a.receipt, N: len(drafts), Date: date.UnixMilli(), Digest: sum, Request: req}
	// The rows' bodies joined are their list's JSON, as rawjson.Of writes
	// it: kept, it is not encoded again when the rows go to a blob.
	rest := restList(drafts[1:], a.receipt)
	for k, d := range drafts[1:] {
		r, body, err := l.makeRow(ctx, a.texts, a.pk, draftRow(d, date, a.receipt, k+1, len(drafts)))
		if err != nil {
			return record{}, 0, err
		}
		rec.Rest, rest = append(rec.Rest, r), rest.add(body)
	}
	var err error
	if rec.First, err = l.end(ctx, a.pk); err != nil {
		return record{}, 0, err
	}
	var body []byte
	// Rows longer than the budget make a record over it: it is not
	// encoded with them only to find that out.
	if len(rest.json) <= store.ItemBudget {
		if body, err = rawjson.Of(rec); err != nil {
			return record{}, 0, err
		}
	}
	if body == nil || !fits(a.pk, a.rk, body) {
		list := rest.done()
		key := store.TextKey(a.texts, list)
		if err := l.blobs.Put(ctx, key, store.Blob{ContentType: "application/json", Data: list}); err != nil {
			return record{}, 0, fmt.Errorf("transcript: storing the rows of a large append: %w", err)
		}
		rec.Rest, rec.RestKey, rec.made = nil, key, rec.Rest
		if body, err = rawjson.Of(rec); err != nil {
			return record{}, 0, err
		}
	}
	it, err := recordItem(a.pk, a.rk, body)
	if err != nil {
		return record{}, 0, err
	}
	err = l.table.Create(ctx, it)
	if errors.Is(err, store.ErrConditionFailed) {
		twin, version, found, err := a.getRecord(ctx)
		if err != nil {
			return record{}, 0, err
		}
		if !found {
			return record{}, 0, fmt.Errorf("transcript: receipt record vanished: %w", errCorrupt)
		}
		return twin, version, nil
	}
	if err != nil {
		return record{}, 0, fmt.Errorf("transcript: writing receipt: %w", err)
	}
	return rec, 1, nil
}

// claim writes the append's first row at the record's first id, moving the
// record on when another append took that id. It returns the record as
// claimed.
func (a *pendingAppend) claim(ctx context.Context, rec record, version int64, first row) (record, error) {
	l := a.l
	body, err := rawjson.Of(first)
	if err != nil {
		return record{}, err
	}
	for range claimAttempts {
		it, err := checked(a.pk, store.EntrySK(rec.First), body)
		if err != nil {
			return record{}, err
		}
		err = l.table.Create(ctx, it)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return record{}, fmt.Errorf("transcript: claiming entry %d: %w", rec.First, err)
		}
		got, err := l.table.Get(ctx, it.Key)
		if errors.Is(err, store.ErrNotFound) {
			return record{}, fmt.Errorf("transcript: entry %d vanished: %w", rec.First, errCorrupt)
		}
		if err != nil {
			return record{}, fmt.Errorf("transcript: reading entry %d: %w", rec.First, err)
		}
		taken, err := decodeRow(got)
		if err != nil {
			return record{}, err
		}
		if taken.Receipt == a.receipt && taken.Pos == 0 {
			return rec, nil // a twin claimed it for us
		}
		next, err := l.probeFrom(ctx, a.pk, taken.end(rec.First))
		if err != nil {
			return record{}, err
		}
		moved := rec
		moved.First = next
		mb, err := rawjson.Of(moved)
		if err != nil {
			return record{}, err
		}
		upd, err := recordItem(a.pk, a.rk, mb)
		if err != nil {
			return record{}, err
		}
		upd.Version = version + 1
		err = l.table.Update(ctx, upd)
		switch {
		case err == nil:
			rec, version = moved, upd.Version
		case errors.Is(err, store.ErrConditionFailed):
			// A twin moved it: follow the record as it is now.
			cur, v, found, err := a.getRecord(ctx)
			if err != nil {
				return record{}, err
			}
			if !found {
				return record{}, fmt.Errorf("transcript: receipt record vanished: %w", errCorrupt)
			}
			rec, version = cur, v
		default:
			return record{}, fmt.Errorf("transcript: updating receipt: %w", err)
		}
	}
	return record{}, store.Unavailable("transcript append", errContended)
}

// finish writes the claimed append's rows not in have (as complete) and
// returns the ids.
func (a *pendingAppend) finish(ctx context.Context, rec record, have map[int64]row) ([]int64, error) {
	if err := a.l.complete(ctx, a.pk, rec, have); err != nil {
		return nil, err
	}
	return rec.ids(), nil
}

// rest returns the rows after an append's first, from its record.
func (l *Log) rest(ctx context.Context, rec record) ([]row, error) {
	if rec.RestKey == "" {
		return rec.Rest, nil
	}
	if rec.made != nil {
		return rec.made, nil
	}
	blob, err := l.blobs.Get(ctx, rec.RestKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("transcript: rows of receipt %q at %s: %w", rec.Receipt, rec.RestKey, errLost)
	}
	if err != nil {
		return nil, fmt.Errorf("transcript: reading the rows of a large append: %w", err)
	}
	var rows []row
	if err := json.Unmarshal(blob.Data, &rows); err != nil {
		return nil, fmt.Errorf("transcript: rows of receipt %q: %w", rec.Receipt, err)
	}
	return rows, nil
}

// complete writes the rows of a claimed append that are not in have (rows
// known to exist, keyed by id; nil means look first). A row found written
// must be this append's own.
func (l *Log) complete(ctx context.Context, pk string, rec record, have map[int64]row) error {
	if rec.N == 1 {
		return nil
	}
	if have == nil {
		var err error
		if have, err = l.rowsIn(ctx, pk, rec.First+1, rec.First+int64(rec.N)); err != nil {
			return err
		}
	}
	if len(have) >= rec.N-1 {
		return nil
	}
	rows, err := l.rest(ctx, rec)
	if err != nil {
		return err
	}
	if len(rows) != rec.N-1 {
		return fmt.Errorf("transcript: receipt %q holds %d rows for an append of %d: %w", rec.Receipt, len(rows), rec.N, errCorrupt)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rowWriteConcurrency)
	for k, r := range rows {
		id := rec.First + int64(k) + 1
		if _, ok := have[id]; ok {
			continue
		}
		g.Go(func() error { return l.writeRow(gctx, pk, id, r) })
	}
	return g.Wait()
}

// writeRow creates one row of a claimed append; when it exists already it
// must be the same append's row at the same place.
func (l *Log) writeRow(ctx context.Context, pk string, id int64, r row) error {
	body, err := rawjson.Of(r)
	if err != nil {
		return err
	}
	it, err := checked(pk, store.EntrySK(id), body)
	if err != nil {
		return err
	}
	err = l.table.Create(ctx, it)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("transcript: writing entry %d: %w", id, err)
	}
	got, err := l.table.Get(ctx, it.Key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("transcript: entry %d vanished: %w", id, errCorrupt)
	}
	if err != nil {
		return fmt.Errorf("transcript: reading entry %d: %w", id, err)
	}
	there, err := decodeRow(got)
	if err != nil {
		return err
	}
	if there.Receipt != r.Receipt || there.Pos != r.Pos {
		return fmt.Errorf("transcript: entry %d belongs to receipt %q at %d, not %q at %d: %w", id, there.Receipt, there.Pos, r.Receipt, r.Pos, errCorrupt)
	}
	return nil
}

// rowsIn returns the rows stored with ids in [from, to).
func (l *Log) rowsIn(ctx context.Context, pk string, from, to int64) (map[int64]row, error) {
	out := map[int64]row{}
	err := l.eachRow(ctx, pk, from, to, func(id int64, r row) error {
		out[id] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow calls fn, in id order, for each row stored with an id in
// [from, to). Rows may be missing (an unfinished append); fn sees only those
// that are there.
func (l *Log) eachRow(ctx context.Context, pk string, from, to int64, fn func(id int64, r row) error) error {
	next := from
	after := ""
	if from > 0 {
		after = store.EntrySK(from - 1)
	}
	for next < to {
		page, err := l.table.Query(ctx, store.Query{PK: pk, Prefix: store.EntryPrefix, After: after, Limit: int(min(to-next, queryPage))})
		if err != nil {
			return fmt.Errorf("transcript: reading entries: %w", err)
		}
		for _, it := range page.Items {
			id, err := store.ParseEntrySK(it.SK)
			if err != nil {
				return err
			}
			if id >= to {
				return nil
			}
			r, err := decodeRow(it)
			if err != nil {
				return err
			}
			if err := fn(id, r); err != nil {
				return err
			}
			next = id + 1
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
	return nil
}
