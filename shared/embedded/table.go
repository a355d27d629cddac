package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/durachat/durachat/shared/store"
)

// DynamoDB's key limits, kept so that a key that works here works there.
const (
	maxPKLen = 2048
	maxSKLen = 1024
)

// maxPageBytes is where a query page stops even below its Limit, as a
// DynamoDB query stops after reading 1 MB.
const maxPageBytes = 1 << 20

// itemFormat is the first byte of every stored item, so the encoding can
// change later without guessing.
const itemFormat = 1

// Table is store.Table on the "table" bucket. Keys are pk \x00 sk, so the
// items of one partition are adjacent and in sort key order, and a cursor
// answers a query.
//
// An item whose Expires has passed is absent to every operation (Get,
// Query, BatchGet, and the conditions of Create and Update) even before
// PurgeExpired removes it.
type Table struct {
	db *DB
}

var _ store.Table = (*Table)(nil)

// Get returns the item at k or store.ErrNotFound.
func (t *Table) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := ctx.Err(); err != nil {
		return store.Item{}, err
	}
	if err := checkKey(k); err != nil {
		return store.Item{}, fmt.Errorf("get: %w", err)
	}
	now := time.Now().Unix()
	var it store.Item
	err := t.db.view("get", func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTable).Get(tableKey(k))
		if v == nil {
			return fmt.Errorf("get %s/%s: %w", k.PK, k.SK, store.ErrNotFound)
		}
		var err error
		if it, err = decodeItem(k, v); err != nil {
			return err
		}
		if expired(it, now) {
			return fmt.Errorf("get %s/%s: expired: %w", k.PK, k.SK, store.ErrNotFound)
		}
		return nil
	})
	return it, err
}

// Create writes it with Version 1 when its key is free (or holds an expired
// item), else store.ErrConditionFailed.
func (t *Table) Create(ctx context.Context, it store.Item) error {
	return t.CreateAll(ctx, []store.Item{it})
}

// CreateAll creates every item, each as Create would (Version 1), in one
// transaction: all of them or, when a key is taken, none
// (store.ErrConditionFailed naming it). It loads many items at the cost of
// one commit (a large fixture, a restore), where Create commits each.
func (t *Table) CreateAll(ctx context.Context, items []store.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// In key order: bbolt splits its pages only at commit, so a large
	// transaction's puts in any other order each shift the page's keys.
	keyed := make([]keyedItem, len(items))
	for i, it := range items {
		it.Version = 1
		if err := checkItem(it); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		keyed[i] = keyedItem{key: tableKey(it.Key), it: it}
	}
	slices.SortFunc(keyed, func(a, b keyedItem) int { return bytes.Compare(a.key, b.key) })
	now := time.Now().Unix()
	return t.db.update("create", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTable)
		for _, k := range keyed {
			key, it := k.key, k.it
			if v := b.Get(key); v != nil {
				old, err := decodeItem(it.Key, v)
				if err != nil {
					return err
				}
				if !expired(old, now) {
					return fmt.Errorf("create %s/%s: exists: %w", it.PK, it.SK, store.ErrConditionFailed)
				}
			}
			if err := b.Put(key, encodeItem(it)); err != nil {
				return err
			}
		}
		return nil
	})
}

type keyedItem struct {
	key []byte
	it  store.Item
}

// Update writes it when the stored item has Version it.Version-1, else
// store.ErrConditionFailed (also when nothing, or only an expired item, is
// stored).
func (t *Table) Update(ctx context.Context, it store.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkItem(it); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	now := time.Now().Unix()
	return t.db.update("update", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTable)
		key := tableKey(it.Key)
		v := b.Get(key)
		if v == nil {
			return fmt.Errorf("update %s/%s: missing: %w", it.PK, it.SK, store.ErrConditionFailed)
		}
		old, err := decodeItem(it.Key, v)
		if err != nil {
			return err
		}
		if expired(old, now) {
			return fmt.Errorf("update %s/%s: expired: %w", it.PK, it.SK, store.ErrConditionFailed)
		}
		if old.Version != it.Version-1 {
			return fmt.Errorf("update %s/%s: stored version %d, writing %d: %w",
				it.PK, it.SK, old.Version, it.Version, store.ErrConditionFailed)
		}
		return b.Put(key, encodeItem(it))
	})
}

// Query returns one page of q.PK's items whose sort key starts with
// q.Prefix, after q.After (exclusive), at most q.Limit of them (no count
// limit when Limit <= 0, but a page stops after about 1 MB of items, as in
// DynamoDB). Next is set only when another matching item exists.
func (t *Table) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := ctx.Err(); err != nil {
		return store.Page{}, err
	}
	if err := checkPK(q.PK); err != nil {
		return store.Page{}, fmt.Errorf("query: %w", err)
	}
	now := time.Now().Unix()
	lo := tableKey(store.Key{PK: q.PK, SK: q.Prefix})
	var page store.Page
	err := t.db.view("query", func(tx *bolt.Tx) error {
		k, v, step := seekQuery(tx.Bucket(bucketTable).Cursor(), q, lo)
		size := 0
		for ; k != nil && bytes.HasPrefix(k, lo); k, v = step() {
			it, err := decodeItem(keyOf(k), v)
			if err != nil {
				return err
			}
			if expired(it, now) {
				continue
			}
			if (q.Limit > 0 && len(page.Items) == q.Limit) || size >= maxPageBytes {
				// A further match exists: this page is not the last.
				page.Next = page.Items[len(page.Items)-1].SK
				return nil
			}
			page.Items = append(page.Items, it)
			size += it.Size()
		}
		return nil
	})
	if err != nil {
		return store.Page{}, err
	}
	return page, nil
}

// seekQuery places c on the first key q reads, in q's direction, and
// returns it with the step to the next: lo is the start of the prefix
// range, and q.After (exclusive) bounds the range on the side it starts.
func seekQuery(c *bolt.Cursor, q store.Query, lo []byte) (k, v []byte, step func() ([]byte, []byte)) {
	if q.Desc {
		// Start at the last key below the exclusive upper bound: the
		// end of the prefix range, or After when that comes first.
		hi := successor(lo)
		if q.After != "" {
			if a := tableKey(store.Key{PK: q.PK, SK: q.After}); bytes.Compare(a, hi) < 0 {
				hi = a
			}
		}
		if k, _ = c.Seek(hi); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		step = c.Prev
	} else {
		start, after := lo, []byte(nil)
		if q.After != "" {
			if a := tableKey(store.Key{PK: q.PK, SK: q.After}); bytes.Compare(a, lo) >= 0 {
				start, after = a, a
			}
		}
		k, v = c.Seek(start)
		if after != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
		step = c.Next
	}
	return k, v, step
}

// BatchGet returns the items at keys that exist, in the order of keys (a
// key given twice gives its item twice); missing and expired ones are left
// out. All are read in one consistent snapshot.
func (t *Table) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
	}
	now := time.Now().Unix()
	var items []store.Item
	err := t.db.view("batch get", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTable)
		for _, k := range keys {
			v := b.Get(tableKey(k))
			if v == nil {
				continue
			}
			it, err := decodeItem(k, v)
			if err != nil {
				return err
			}
			if !expired(it, now) {
				items = append(items, it)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// purgeBatch bounds the work of one PurgeExpired transaction, so writers
// are not held up for long.
const purgeBatch = 1000

// PurgeExpired deletes the items whose Expires has passed and reports how
// many. Reads already treat them as absent; this only reclaims the space.
func (db *DB) PurgeExpired(ctx context.Context) (int, error) {
	now := time.Now().Unix()
	deleted := 0
	var from []byte
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		var doomed [][]byte
		var next []byte
		err := db.update("purge expired", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketTable)
			c := b.Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			for scanned := 0; k != nil; k, v = c.Next() {
				if scanned == purgeBatch {
					next = bytes.Clone(k)
					break
				}
				scanned++
				it, err := decodeItem(keyOf(k), v)
				if err != nil {
					return err
				}
				if expired(it, now) {
					doomed = append(doomed, bytes.Clone(k))
				}
			}
			for _, k := range doomed {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += len(doomed)
		if next == nil {
			return deleted, nil
		}
		from = next
	}
}

func expired(it store.Item, now int64) bool {
	return it.Expires != 0 && now > it.Expires
}

func checkPK(pk string) error {
	switch {
	case pk == "":
		return fmt.Errorf("%w: empty partition key", ErrInvalidKey)
	case len(pk) > maxPKLen:
		return fmt.Errorf("%w: partition key is %d bytes, limit %d", ErrInvalidKey, len(pk), maxPKLen)
	case bytes.IndexByte([]byte(pk), 0) >= 0:
		return fmt.Errorf("%w: partition key %q contains NUL", ErrInvalidKey, pk)
	}
	return nil
}

func checkKey(k store.Key) error {
	if err := checkPK(k.PK); err != nil {
		return err
	}
	switch {
	case k.SK == "":
		return fmt.Errorf("%w: empty sort key in partition %q", ErrInvalidKey, k.PK)
	case len(k.SK) > maxSKLen:
		return fmt.Errorf("%w: sort key is %d bytes, limit %d", ErrInvalidKey, len(k.SK), maxSKLen)
	}
	return nil
}

func checkItem(it store.Item) error {
	if err := checkKey(it.Key); err != nil {
		return err
	}
	return store.CheckSize(it)
}

// tableKey is pk \x00 sk. Partition keys hold no NUL, so the prefix
// pk \x00 selects exactly one partition and keeps it in sort key order.
func tableKey(k store.Key) []byte {
	b := make([]byte, 0, len(k.PK)+1+len(k.SK))
	b = append(b, k.PK...)
	b = append(b, 0)
	return append(b, k.SK...)
}

func keyOf(key []byte) store.Key {
	pk, sk, _ := bytes.Cut(key, []byte{0})
	return store.Key{PK: string(pk), SK: string(sk)}
}

// successor is the least byte string greater than every string that has
// prefix p, or nil when there is none (p all 0xff).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}

// encodeItem is format byte, uvarint version, varint expires, then the body.
func encodeItem(it store.Item) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(it.Body))
	b = append(b, itemFormat)
	b = binary.AppendUvarint(b, uint64(it.Version))
	b = binary.AppendVarint(b, it.Expires)
	return append(b, it.Body...)
}

var errCorrupt = errors.New("embedded: corrupt item")

// decodeItem copies the item out of v, which bbolt owns only for the
// transaction.
func decodeItem(k store.Key, v []byte) (store.Item, error) {
	if len(v) == 0 || v[0] != itemFormat {
		return store.Item{}, fmt.Errorf("%w: %s/%s: unknown format", errCorrupt, k.PK, k.SK)
	}
	rest := v[1:]
	version, n := binary.Uvarint(rest)
	if n <= 0 {
		return store.Item{}, fmt.Errorf("%w: %s/%s: bad version", errCorrupt, k.PK, k.SK)
	}
	rest = rest[n:]
	exp, n := binary.Varint(rest)
	if n <= 0 {
		return store.Item{}, fmt.Errorf("%w: %s/%s: bad expiry", errCorrupt, k.PK, k.SK)
	}
	rest = rest[n:]
	return store.Item{Key: k, Version: int64(version), Expires: exp, Body: bytes.Clone(rest)}, nil
}

// Delete removes the item at k: unconditionally with version 0, else only
// when the stored, unexpired item has that version.
func (t *Table) Delete(ctx context.Context, k store.Key, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkPK(k.PK); err != nil || k.SK == "" {
		return fmt.Errorf("delete %q/%q: partition and sort key must not be empty", k.PK, k.SK)
	}
	now := time.Now().Unix()
	return t.db.update("delete", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTable)
		key := tableKey(k)
		if version != 0 {
			v := b.Get(key)
			if v == nil {
				return fmt.Errorf("delete %s/%s: missing: %w", k.PK, k.SK, store.ErrConditionFailed)
			}
			old, err := decodeItem(k, v)
			if err != nil {
				return err
			}
			if expired(old, now) || old.Version != version {
				return fmt.Errorf("delete %s/%s: stored version %d, not %d: %w", k.PK, k.SK, old.Version, version, store.ErrConditionFailed)
			}
		}
		return b.Delete(key)
	})
}
