package transcript

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// eraseRetries bounds the optimistic-locking loop of one tombstone write.
const eraseRetries = 16

// tombstone is the row that keeps an erased entry's place: its kind, date
// and append (receipt, position, size, whether it continues a message),
// and when it was erased; none of its words, its message record or the
// blobs those were moved to.
func (r row) tombstone(at int64) row {
	return row{Kind: r.Kind, Date: r.Date, Receipt: r.Receipt, Pos: r.Pos, N: r.N, Tool: r.Tool, Of: r.Of, Cont: r.Cont, Erased: at}
}

// Erase replaces the entries ids of the incarnation c with tombstones
// erased at at: each keeps its id (no other entry moves), and reads back
// as erased. The texts and message records moved to blobs go unless a live
// entry of the chat names the same blob (the same words logged again),
// and the receipt record of each erased entry's append keeps no copy of
// it. An entry erased already keeps its first time; a call cut off midway
// is finished by calling it again. An id past the log is a
// store.ErrNotFound (wrapped).
func (l *Log) Erase(ctx context.Context, c chatid.Chat, ids []int64, at time.Time) error {
	pk := c.PK()
	ms := at.UnixMilli()
	var blobs []string
	byReceipt := map[string]map[int]row{} // the tombstones of each append, by position
	for _, id := range ids {
		tomb, moved, err := l.eraseRow(ctx, pk, id, ms)
		if err != nil {
			return err
		}
		blobs = append(blobs, moved...)
		if byReceipt[tomb.Receipt] == nil {
			byReceipt[tomb.Receipt] = map[int]row{}
		}
		byReceipt[tomb.Receipt][tomb.Pos] = tomb
	}
	for receipt, tombs := range byReceipt {
		if err := l.eraseRecord(ctx, pk, receipt, tombs); err != nil {
			return err
		}
	}
	return l.dropBlobs(ctx, pk, blobs)
}

// eraseRow writes entry id's tombstone (keeping an earlier erasure's) and
// returns it with the blobs the row named.
func (l *Log) eraseRow(ctx context.Context, pk string, id, at int64) (row, []string, error) {
	k := store.Key{PK: pk, SK: store.EntrySK(id)}
	for range eraseRetries {
		it, err := l.table.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return row{}, nil, fmt.Errorf("transcript: erasing entry %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return row{}, nil, fmt.Errorf("transcript: reading entry %d: %w", id, err)
		}
		r, err := decodeRow(it)
		if err != nil {
			return row{}, nil, err
		}
		if r.Erased != 0 {
			return r, nil, nil
		}
		var moved []string
		for _, key := range []string{r.TextKey, r.RecKey} {
			if key != "" {
				moved = append(moved, key)
			}
		}
		tomb := r.tombstone(at)
		body, err := rawjson.Of(tomb)
		if err != nil {
			return row{}, nil, err
		}
		err = l.table.Update(ctx, store.Item{Key: k, Version: it.Version + 1, Body: body})
		if err == nil {
			return tomb, moved, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return row{}, nil, fmt.Errorf("transcript: erasing entry %d: %w", id, err)
		}
	}
	return row{}, nil, store.Unavailable("transcript erase", fmt.Errorf("entry %d: too many concurrent writers", id))
}

// eraseRecord replaces, in the receipt record of an append (when it is
// still kept), the rows of the erased entries by their tombstones, so the
// record that lets a retry finish the append holds none of their words.
// A record whose rest was moved to a blob gets a new blob, and the old one
// goes.
func (l *Log) eraseRecord(ctx context.Context, pk, receipt string, tombs map[int]row) error {
	a := &pendingAppend{l: l, pk: pk, receipt: receipt, rk: store.ReceiptSK(receipt)}
	for range eraseRetries {
		rec, version, found, err := a.getRecord(ctx)
		if err != nil || !found {
			return err
		}
		rest, err := l.rest(ctx, rec)
		if errors.Is(err, errLost) {
			rest = nil // nothing left to scrub there
		} else if err != nil {
			return err
		}
		if !scrub(rest, tombs) {
			return nil
		}
		old := rec.RestKey
		if err := l.setRest(ctx, &rec, rest); err != nil {
			return err
		}
		body, err := rawjson.Of(rec)
		if err != nil {
			return err
		}
		it, err := recordItem(pk, a.rk, body)
		if err != nil {
			return err
		}
		it.Version = version + 1
		err = l.table.Update(ctx, it)
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return fmt.Errorf("transcript: erasing from receipt record %s: %w", a.rk, err)
		}
		if old != "" && old != rec.RestKey {
			if err := l.blobs.Delete(ctx, old); err != nil {
				return fmt.Errorf("transcript: deleting the erased rows of a large append: %w", err)
			}
		}
		return nil
	}
	return store.Unavailable("transcript erase", fmt.Errorf("receipt record %s: too many concurrent writers", a.rk))
}

// scrub replaces the rows of rest (an append's rows after its first) at
// the positions of tombs by the tombstones, and reports whether it
// replaced any.
func scrub(rest []row, tombs map[int]row) bool {
	changed := false
	for pos, t := range tombs {
		if pos >= 1 && pos-1 < len(rest) && rest[pos-1].Erased == 0 {
			rest[pos-1], changed = t, true
		}
	}
	return changed
}

// setRest makes rest the rows of the record after its first: in the
// record, or in a new blob when the record kept them in one.
func (l *Log) setRest(ctx context.Context, rec *record, rest []row) error {
	if rec.RestKey == "" {
		rec.Rest = rest
		return nil
	}
	data, err := rawjson.Of(rest)
	if err != nil {
		return err
	}
	rec.RestKey = store.TextKey(prefixOf(rec.RestKey), data)
	if err := l.blobs.Put(ctx, rec.RestKey, store.Blob{ContentType: "application/json", Data: data}); err != nil {
		return fmt.Errorf("transcript: storing the erased rows of a large append: %w", err)
	}
	return nil
}

// prefixOf is the text prefix a blob key lives under: everything up to
// its last '/'.
func prefixOf(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[:i+1]
		}
	}
	return ""
}

// dropBlobs deletes the blobs erased rows named, except those a live row
// still names (blobs are content addressed, so the same words logged
// again share one). It reads the log only when there is a blob to drop.
func (l *Log) dropBlobs(ctx context.Context, pk string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	live := map[string]bool{}
	err := l.eachRow(ctx, pk, 0, 1<<62, func(_ int64, r row) error {
		live[r.TextKey], live[r.RecKey] = true, true
		return nil
	})
	if err != nil {
		return err
	}
	for _, key := range keys {
		if live[key] {
			continue
		}
		if err := l.blobs.Delete(ctx, key); err != nil {
			return fmt.Errorf("transcript: deleting an erased text: %w", err)
		}
	}
	return nil
}

// MessageEntries returns the ids of the entries of the message whose
// first entry is seq (as read back): seq and the entries continuing it.
// It is a store.ErrNotFound (wrapped) when no message starts at seq.
func (l *Log) MessageEntries(ctx context.Context, c chatid.Chat, seq int64) ([]int64, error) {
	if seq < 0 {
		return nil, fmt.Errorf("transcript: no message starts at %d: %w", seq, store.ErrNotFound)
	}
	var ids []int64
	from := seq
	for {
		lgs, err := l.Read(ctx, c, from, from+queryPage)
		if err != nil {
			return nil, err
		}
		for _, lg := range lgs {
			switch {
			case lg.I == seq && lg.Continues:
				return nil, fmt.Errorf("transcript: entry %d continues a message: %w", seq, store.ErrNotFound)
			case lg.I != seq && !lg.Continues:
				return ids, nil
			}
			ids = append(ids, lg.I)
		}
		if len(lgs) < queryPage {
			if len(ids) == 0 {
				return nil, fmt.Errorf("transcript: no message starts at %d: %w", seq, store.ErrNotFound)
			}
			return ids, nil
		}
		from += queryPage
	}
}

// MessageOf returns the seq of the message holding entry id: the entry
// itself, or the nearest before it that a message starts at. It is a
// store.ErrNotFound (wrapped) when the log holds no entry id.
func (l *Log) MessageOf(ctx context.Context, c chatid.Chat, id int64) (int64, error) {
	if id < 0 {
		return 0, fmt.Errorf("transcript: no entry %d: %w", id, store.ErrNotFound)
	}
	for to := id + 1; to > 0; to -= queryPage {
		lgs, err := l.Read(ctx, c, max(0, to-queryPage), to)
		if err != nil {
			return 0, err
		}
		if to == id+1 && (len(lgs) == 0 || lgs[len(lgs)-1].I != id) {
			return 0, fmt.Errorf("transcript: no entry %d: %w", id, store.ErrNotFound)
		}
		for k := len(lgs) - 1; k >= 0; k-- {
			if !lgs[k].Continues {
				return lgs[k].I, nil
			}
		}
	}
	return 0, fmt.Errorf("transcript: entry %d continues no message: %w", id, store.ErrNotFound)
}
