package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
)

const (
	// hintRetries bounds the tries to raise the length hint against
	// concurrent raises.
	hintRetries = 3
	// hintLag is how far past the hint (in ids) a probe may end before the
	// hint is raised.
	hintLag = 4
)

// meta is the length hint.
type meta struct {
	Len int64 `json:"len"`
}

// hint reads the length hint: every id below it is taken. 0 when absent.
func (l *Log) hint(ctx context.Context, pk string) (length, version int64, err error) {
	it, err := l.table.Get(ctx, store.Key{PK: pk, SK: metaKey})
	if errors.Is(err, store.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("transcript: reading length hint: %w", err)
	}
	var m meta
	if json.Unmarshal(it.Body, &m) != nil || m.Len < 0 {
		return 0, it.Version, nil // a bad hint is no hint; probing finds the end
	}
	return m.Len, it.Version, nil
}

// raiseHint sets the hint to length unless it is there already.
func (l *Log) raiseHint(ctx context.Context, pk string, length int64) error {
	body, err := api.Marshal(meta{Len: length})
	if err != nil {
		return err
	}
	for range hintRetries {
		cur, version, err := l.hint(ctx, pk)
		if err != nil {
			return err
		}
		if cur >= length {
			return nil
		}
		it := store.Item{Key: store.Key{PK: pk, SK: metaKey}, Body: body}
		if version == 0 {
			err = l.table.Create(ctx, it)
		} else {
			it.Version = version + 1
			err = l.table.Update(ctx, it)
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
	}
	return nil
}

// probeFrom walks from a batch boundary to the first free id, batch by
// batch: each row says where its batch ends.
func (l *Log) probeFrom(ctx context.Context, pk string, from int64) (int64, error) {
	n := from
	for {
		it, err := l.table.Get(ctx, store.Key{PK: pk, SK: entryKey(n)})
		if errors.Is(err, store.ErrNotFound) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("transcript: probing entry %d: %w", n, err)
		}
		r, err := decodeRow(it)
		if err != nil {
			return 0, err
		}
		end := r.end(n)
		if end <= n {
			return 0, fmt.Errorf("transcript: entry %d ends its batch at %d: %w", n, end, errCorrupt)
		}
		n = end
	}
}

// Len returns the number of entries of the incarnation c.
func (l *Log) Len(ctx context.Context, c chatid.Chat) (int64, error) {
	pk := c.PK()
	h, _, err := l.hint(ctx, pk)
	if err != nil {
		return 0, err
	}
	n, err := l.probeFrom(ctx, pk, h)
	if err != nil {
		return 0, err
	}
	if n-h >= hintLag {
		_ = l.raiseHint(ctx, pk, n) // best effort: the next probe is shorter
	}
	return n, nil
}

// Entry returns entry i of the incarnation c, or store.ErrNotFound
// (wrapped) past the end.
func (l *Log) Entry(ctx context.Context, c chatid.Chat, i int64) (Entry, error) {
	if i < 0 {
		return Entry{}, fmt.Errorf("transcript: entry %d: %w", i, store.ErrNotFound)
	}
	pk := c.PK()
	it, err := l.table.Get(ctx, store.Key{PK: pk, SK: entryKey(i)})
	if err == nil {
		r, err := decodeRow(it)
		if err != nil {
			return Entry{}, err
		}
		return l.entry(ctx, i, r)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return Entry{}, fmt.Errorf("transcript: reading entry %d: %w", i, err)
	}
	// Past the end, or in a batch whose rows are not all written yet.
	es, err := l.fill(ctx, pk, i, i+1, true)
	if err != nil {
		return Entry{}, err
	}
	if len(es) == 0 {
		return Entry{}, fmt.Errorf("transcript: entry %d: %w", i, store.ErrNotFound)
	}
	return es[0], nil
}

// Entries returns the entries of the incarnation c with ids in [from, to),
// in order; fewer when the log ends before to.
func (l *Log) Entries(ctx context.Context, c chatid.Chat, from, to int64) ([]Entry, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("transcript: entries [%d, %d) is not a range", from, to)
	}
	pk := c.PK()
	out := make([]Entry, 0, min(to-from, queryPage))
	next := from
	err := l.eachRow(ctx, pk, from, to, func(id int64, r row) error {
		if id > next {
			// Rows missing below a written one: an unfinished batch.
			es, err := l.fill(ctx, pk, next, id, false)
			if err != nil {
				return err
			}
			out = append(out, es...)
		}
		e, err := l.entry(ctx, id, r)
		if err != nil {
			return err
		}
		out = append(out, e)
		next = id + 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	if next < to {
		es, err := l.fill(ctx, pk, next, to, true)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// fill returns the entries [from, to) that are missing as rows because
// their batch was claimed but not finished, finishing each such batch
// first. atEnd says the log may simply end at from; otherwise a missing
// row must belong to an unfinished batch.
func (l *Log) fill(ctx context.Context, pk string, from, to int64, atEnd bool) ([]Entry, error) {
	var out []Entry
	for from < to {
		page, err := l.table.Query(ctx, store.Query{PK: pk, Prefix: entryPrefix, After: entryKey(from), Desc: true, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("transcript: reading entries: %w", err)
		}
		var below row
		var id int64 = -1
		if len(page.Items) == 1 {
			if id, err = entryID(page.Items[0].SK); err != nil {
				return nil, err
			}
			if below, err = decodeRow(page.Items[0]); err != nil {
				return nil, err
			}
		}
		if id < 0 || below.end(id) <= from {
			if atEnd {
				return out, nil
			}
			return nil, fmt.Errorf("transcript: entry %d is missing inside the log: %w", from, errCorrupt)
		}
		start := id - int64(below.Pos)
		b := &batch{l: l, pk: pk, receipt: below.Receipt, rk: receiptKey(below.Receipt), hint: -1}
		rec, _, found, err := b.getRecord(ctx)
		if err != nil {
			return nil, err
		}
		if !found || rec.First != start || rec.N != below.N {
			return nil, fmt.Errorf("transcript: batch at %d has no matching receipt record: %w", start, errCorrupt)
		}
		if err := l.complete(ctx, pk, rec, nil); err != nil {
			return nil, err
		}
		end := min(start+int64(rec.N), to)
		rows, err := l.rowsIn(ctx, pk, from, end)
		if err != nil {
			return nil, err
		}
		for i := from; i < end; i++ {
			r, ok := rows[i]
			if !ok {
				return nil, fmt.Errorf("transcript: entry %d still missing after completing its batch: %w", i, errCorrupt)
			}
			e, err := l.entry(ctx, i, r)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		from = end
	}
	return out, nil
}
