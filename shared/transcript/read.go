package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
)

// end returns the first free id of the log kept in pk: where the append
// of its highest entry ends. Appends are claimed in order, each at the
// end of the one before, and an append's rows lie inside its own range, so
// the highest entry belongs to the last append (whose other rows may still
// be coming). One query, newest first, for the one item.
func (l *Log) end(ctx context.Context, pk string) (int64, error) {
	page, err := l.table.Query(ctx, store.Query{PK: pk, Prefix: store.EntryPrefix, Desc: true, Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("transcript: reading the last entry: %w", err)
	}
	if len(page.Items) == 0 {
		return 0, nil
	}
	it := page.Items[0]
	id, err := store.ParseEntrySK(it.SK)
	if err != nil {
		return 0, fmt.Errorf("transcript: last entry %s: %w", it.SK, errCorrupt)
	}
	r, err := decodeRow(it)
	if err != nil {
		return 0, err
	}
	end := r.end(id)
	if end <= id {
		return 0, fmt.Errorf("transcript: entry %d ends its append at %d: %w", id, end, errCorrupt)
	}
	return end, nil
}

// probeFrom walks from an append's boundary to the first free id, append
// by append: each row says where its append ends.
func (l *Log) probeFrom(ctx context.Context, pk string, from int64) (int64, error) {
	n := from
	for {
		it, err := l.table.Get(ctx, store.Key{PK: pk, SK: store.EntrySK(n)})
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
			return 0, fmt.Errorf("transcript: entry %d ends its append at %d: %w", n, end, errCorrupt)
		}
		n = end
	}
}

// Len returns the number of entries of the incarnation c.
func (l *Log) Len(ctx context.Context, c chatid.Chat) (int64, error) {
	return l.end(ctx, c.PK())
}

// Entry returns entry i of the incarnation c, or store.ErrNotFound
// (wrapped) past the end.
func (l *Log) Entry(ctx context.Context, c chatid.Chat, i int64) (Entry, error) {
	if i < 0 {
		return Entry{}, fmt.Errorf("transcript: entry %d: %w", i, store.ErrNotFound)
	}
	pk := c.PK()
	it, err := l.table.Get(ctx, store.Key{PK: pk, SK: store.EntrySK(i)})
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
	// Past the end, or in an append whose rows are not all written yet.
	var es []Entry
	err = l.fill(ctx, pk, i, i+1, true, func(id int64, r row) error {
		e, err := l.entry(ctx, id, r)
		es = append(es, e)
		return err
	})
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
	out := make([]Entry, 0, min(to-from, queryPage))
	err := l.rows(ctx, c.PK(), from, to, func(id int64, r row) error {
		e, err := l.entry(ctx, id, r)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rows calls fn, in id order, with the rows of the entries [from, to),
// finishing first any append a crash left unfinished; it stops early where
// the log ends.
func (l *Log) rows(ctx context.Context, pk string, from, to int64, fn func(id int64, r row) error) error {
	next := from
	err := l.eachRow(ctx, pk, from, to, func(id int64, r row) error {
		if id > next {
			// Rows missing below a written one: an unfinished append.
			if err := l.fill(ctx, pk, next, id, false, fn); err != nil {
				return err
			}
		}
		if err := fn(id, r); err != nil {
			return err
		}
		next = id + 1
		return nil
	})
	if err != nil {
		return err
	}
	if next < to {
		return l.fill(ctx, pk, next, to, true, fn)
	}
	return nil
}

// fill calls fn with the rows [from, to) that are missing because their
// append was claimed but not finished, finishing each such append first.
// atEnd says the log may simply end at from; otherwise a missing row must
// belong to an unfinished append.
func (l *Log) fill(ctx context.Context, pk string, from, to int64, atEnd bool, fn func(id int64, r row) error) error {
	for from < to {
		page, err := l.table.Query(ctx, store.Query{PK: pk, Prefix: store.EntryPrefix, After: store.EntrySK(from), Desc: true, Limit: 1})
		if err != nil {
			return fmt.Errorf("transcript: reading entries: %w", err)
		}
		var below row
		var id int64 = -1
		if len(page.Items) == 1 {
			if id, err = store.ParseEntrySK(page.Items[0].SK); err != nil {
				return err
			}
			if below, err = decodeRow(page.Items[0]); err != nil {
				return err
			}
		}
		if id < 0 || below.end(id) <= from {
			if atEnd {
				return nil
			}
			return fmt.Errorf("transcript: entry %d is missing inside the log: %w", from, errCorrupt)
		}
		start := id - int64(below.Pos)
		a := &pendingAppend{l: l, pk: pk, receipt: below.Receipt, rk: store.ReceiptSK(below.Receipt)}
		rec, _, found, err := a.getRecord(ctx)
		if err != nil {
			return err
		}
		if !found || rec.First != start || rec.N != below.N {
			return fmt.Errorf("transcript: the append at %d has no matching receipt record: %w", start, errCorrupt)
		}
		if err := l.complete(ctx, pk, rec, nil); err != nil {
			return err
		}
		end := min(start+int64(rec.N), to)
		rows, err := l.rowsIn(ctx, pk, from, end)
		if err != nil {
			return err
		}
		for i := from; i < end; i++ {
			r, ok := rows[i]
			if !ok {
				return fmt.Errorf("transcript: entry %d still missing after completing its append: %w", i, errCorrupt)
			}
			if err := fn(i, r); err != nil {
				return err
			}
		}
		from = end
	}
	return nil
}

// Logged is one entry as the record reads it back.
type Logged struct {
	// Entry is the entry; its Text is read only when Record and Continues
	// are unset (an entry written before messages were recorded, which
	// reads back from its text).
	Entry
	// Record is the message this entry starts.
	Record *Record
	// Continues marks a later entry of a message an earlier entry starts:
	// it reads back as nothing of its own.
	Continues bool
}

// Legacy reports whether the entry was written before messages were
// recorded: it reads back from its text, as memory sees it.
func (lg Logged) Legacy() bool { return lg.Record == nil && !lg.Continues && lg.Erased.IsZero() }

// Read returns the entries of the incarnation c with ids in [from, to) as
// the record reads them back, in order; fewer when the log ends before to.
func (l *Log) Read(ctx context.Context, c chatid.Chat, from, to int64) ([]Logged, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("transcript: entries [%d, %d) is not a range", from, to)
	}
	var out []Logged
	err := l.rows(ctx, c.PK(), from, to, func(id int64, r row) error {
		lg, err := l.logged(ctx, id, r)
		if err != nil {
			return err
		}
		out = append(out, lg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// logged turns a row into what it reads back as, reading a record (or, for
// an entry written before records, a text) moved to a blob.
func (l *Log) logged(ctx context.Context, id int64, r row) (Logged, error) {
	switch {
	case r.Erased != 0:
		e, err := l.entry(ctx, id, r)
		return Logged{Entry: e, Continues: r.Cont}, err
	case r.Cont:
		r.Text, r.TextKey = "", ""
		e, err := l.entry(ctx, id, r)
		return Logged{Entry: e, Continues: true}, err
	case r.Rec != nil || r.RecKey != "":
		rec := r.Rec
		r.Text, r.TextKey = "", ""
		e, err := l.entry(ctx, id, r)
		if err != nil {
			return Logged{}, err
		}
		if rec == nil {
			if rec, err = l.record(ctx, id, r.RecKey); err != nil {
				return Logged{}, err
			}
		}
		return Logged{Entry: e, Record: rec}, nil
	}
	e, err := l.entry(ctx, id, r)
	return Logged{Entry: e}, err
}

// record reads a message record moved to the blob key.
func (l *Log) record(ctx context.Context, id int64, key string) (*Record, error) {
	b, err := l.blobs.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("transcript: entry %d: its message %s is missing: %w", id, key, errLost)
	}
	if err != nil {
		return nil, fmt.Errorf("transcript: entry %d: reading its message: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(b.Data, &rec); err != nil || len(rec.JSON) == 0 {
		return nil, fmt.Errorf("transcript: entry %d: its message %s is malformed: %w", id, key, errCorrupt)
	}
	return &rec, nil
}
