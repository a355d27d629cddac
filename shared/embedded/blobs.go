package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/durachat/durachat/shared/store"
)

// MaxBlobSize bounds one object. durachat stores images (at most a few MiB
// after shrinking) and pieces of text; anything near this is a bug.
const MaxBlobSize = 64 << 20

// maxBlobKeyLen is S3's key limit.
const maxBlobKeyLen = 1024

// blobFormat is the first byte of every stored blob.
const blobFormat = 1

// Blobs is create-once store.Blobs on the "blobs" bucket. A Put checks for
// the key and writes inside one bbolt write transaction, and bbolt runs one
// writer at a time, so of concurrent puts of one key exactly one writes and
// the rest find it present.
type Blobs struct {
	db *DB
}

var _ store.Blobs = (*Blobs)(nil)

// Put stores b under key unless key exists; either way it succeeds.
func (s *Blobs) Put(ctx context.Context, key string, b store.Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBlobKey(key); err != nil {
		return fmt.Errorf("put blob: %w", err)
	}
	if len(b.Data) > MaxBlobSize {
		return fmt.Errorf("put blob %s: %d bytes, limit %d: %w", key, len(b.Data), MaxBlobSize, store.ErrTooLarge)
	}
	return s.db.update("put blob", func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlobs)
		if bk.Get([]byte(key)) != nil || bk.Bucket([]byte(key)) != nil {
			return nil
		}
		// A blob is a bucket of its own: bbolt writes a leaf whole, with
		// at least two of its keys, so a large blob stored as a value
		// beside others was written again with each blob put next to it.
		// In its own bucket it is written once, and its neighbours are
		// bucket headers.
		one, err := bk.CreateBucket([]byte(key))
		if err != nil {
			return err
		}
		if err := one.Put(blobTypeKey, []byte(b.ContentType)); err != nil {
			return err
		}
		return one.Put(blobDataKey, b.Data)
	})
}

// Get returns the object at key or store.ErrNotFound.
func (s *Blobs) Get(ctx context.Context, key string) (store.Blob, error) {
	var out store.Blob
	err := s.read(ctx, "get blob", key, func(ct string, data []byte) {
		out = store.Blob{ContentType: ct, Data: bytes.Clone(data)}
	})
	return out, err
}

// Head returns the content type and size of the object at key, or
// store.ErrNotFound.
func (s *Blobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	var info store.BlobInfo
	err := s.read(ctx, "head blob", key, func(ct string, data []byte) {
		info = store.BlobInfo{ContentType: ct, Size: int64(len(data))}
	})
	return info, err
}

// read hands the object at key to got inside a read transaction; data is
// bbolt's memory, valid only during got.
func (s *Blobs) read(ctx context.Context, op, key string, got func(contentType string, data []byte)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBlobKey(key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.db.view(op, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlobs)
		if one := bk.Bucket([]byte(key)); one != nil {
			data := one.Get(blobDataKey)
			if data == nil {
				return fmt.Errorf("%w: blob %s: no data", errCorrupt, key)
			}
			got(string(one.Get(blobTypeKey)), data)
			return nil
		}
		v := bk.Get([]byte(key))
		if v == nil {
			return fmt.Errorf("%s %s: %w", op, key, store.ErrNotFound)
		}
		ct, data, err := decodeBlob(key, v)
		if err != nil {
			return err
		}
		got(ct, data)
		return nil
	})
}

func checkBlobKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty blob key", ErrInvalidKey)
	case len(key) > maxBlobKeyLen:
		return fmt.Errorf("%w: blob key is %d bytes, limit %d", ErrInvalidKey, len(key), maxBlobKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: blob key %q is not UTF-8", ErrInvalidKey, key)
	}
	return nil
}

// A blob is stored as a bucket holding its content type and its data.
// Files written before that hold it as one value, encodeBlob's.
var (
	blobTypeKey = []byte("t")
	blobDataKey = []byte("d")
)

// encodeBlob is how files written before blobs had buckets of their own
// hold one: format byte, uvarint content type length, content type, then
// the data. Get, Head and Delete still read it.
func encodeBlob(b store.Blob) []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(b.ContentType)+len(b.Data))
	out = append(out, blobFormat)
	out = binary.AppendUvarint(out, uint64(len(b.ContentType)))
	out = append(out, b.ContentType...)
	return append(out, b.Data...)
}

// decodeBlob returns slices of v; copy them before the transaction ends.
func decodeBlob(key string, v []byte) (contentType string, data []byte, err error) {
	if len(v) == 0 || v[0] != blobFormat {
		return "", nil, fmt.Errorf("%w: blob %s: unknown format", errCorrupt, key)
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)-1-w) {
		return "", nil, fmt.Errorf("%w: blob %s: bad content type length", errCorrupt, key)
	}
	start := 1 + w
	return string(v[start : start+int(n)]), v[start+int(n):], nil
}

// List returns up to limit keys with the prefix after after, in order.
func (s *Blobs) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var keys []string
	err := s.db.view("list blobs", func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		k, _ := c.Seek([]byte(max(prefix, after)))
		for ; k != nil && len(keys) < limit && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
			if string(k) > after {
				keys = append(keys, string(k))
			}
		}
		return nil
	})
	return keys, err
}

// Delete removes the object at key; a missing key is no error.
func (s *Blobs) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBlobKey(key); err != nil {
		return fmt.Errorf("delete blob: %w", err)
	}
	return s.db.update("delete blob", func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlobs)
		if bk.Bucket([]byte(key)) != nil {
			return bk.DeleteBucket([]byte(key))
		}
		return bk.Delete([]byte(key))
	})
}
