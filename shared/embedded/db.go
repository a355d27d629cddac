// Package embedded implements durachat's storage contracts (store.Table,
// store.Blobs, store.Queue and store.Receiver, store.Linker) on one bbolt
// file, so the service runs on a laptop with no AWS account. It keeps the
// limits of the AWS services it stands in for (the 400 KB item, SQS delays
// and visibility ranges), so code that works here does not break in AWS.
//
// Layout of the file (top-level buckets):
//
//	table   pk \x00 sk -> item (version, expires, body)
//	blobs   key        -> bucket with "t" (content type) and "d" (data);
//	                      files written before hold key -> encodeBlob's value
//	queues  name       -> bucket with "m" (visible-at ‖ id -> message)
//	                      and "i" (id -> visible-at ‖ id)
//
// Blobs live in the same file rather than as files beside it: bbolt's single
// writer makes create-once a plain check-then-put inside one transaction, an
// object and its content type are written together or not at all, and a
// copy of one file is a complete backup. The objects durachat stores are
// small (images under a few MiB, text pieces), well within what bbolt
// handles; MaxBlobSize bounds them.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/durachat/durachat/shared/store"
)

// FileName is the bbolt file Open creates in its directory.
const FileName = "durachat.db"

// LockTimeout is how long Open waits for another process to release the
// file before giving up with ErrLocked.
const LockTimeout = 2 * time.Second

var (
	// ErrLocked: another process has the database open.
	ErrLocked = errors.New("embedded: database is locked by another process")
	// ErrClosed: the DB was closed; pending Receive calls return it, and
	// calls started once Close has begun wrap it in store.ErrUnavailable.
	ErrClosed = errors.New("embedded: database closed")
	// ErrInvalidKey: a key the AWS services would refuse too (empty, too
	// long), or one the embedded layout cannot hold (a NUL in a partition key).
	ErrInvalidKey = errors.New("embedded: invalid key")
)

var (
	bucketTable  = []byte("table")
	bucketBlobs  = []byte("blobs")
	bucketQueues = []byte("queues")
)

// DB is an open embedded store. Its methods are safe for concurrent use.
type DB struct {
	bolt *bolt.DB
	path string
	// txs is held shared by every transaction and alone by Scrub, which
	// may overwrite only pages no open transaction can read.
	txs sync.RWMutex

	mu     sync.Mutex
	queues map[string]*Queue
	closed chan struct{} // closed by Close; wakes waiting receivers
}

// Open creates dir when needed and opens (or creates) the database file in
// it. When another process holds the file, Open fails with ErrLocked after
// LockTimeout instead of hanging.
func Open(dir string) (*DB, error) {
	if dir == "" {
		return nil, errors.New("embedded: open: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: open: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// The free list is a map, rebuilt from the page map at open and never
	// written: an array list is merged and written whole at every commit,
	// which with the free pages large blobs leave cost more than the data.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: LockTimeout, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketTable, bucketBlobs, bucketQueues} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("embedded: open %s: creating buckets: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, queues: map[string]*Queue{}, closed: make(chan struct{})}
	// What a process that ended between a deletion and its scrub left.
	if err := db.Scrub(context.Background()); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	return db, nil
}

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Close releases the file. Waiting receivers return ErrClosed; calls
// started once Close has begun fail with store.ErrUnavailable (wrapping
// ErrClosed) and write nothing. Calls already in a transaction finish
// before the file is released.
func (db *DB) Close() error {
	db.mu.Lock()
	select {
	case <-db.closed:
		db.mu.Unlock()
		return nil
	default:
		close(db.closed)
	}
	db.mu.Unlock()
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("embedded: close: %w", err)
	}
	return nil
}

// Table is the store.Table of this database.
func (db *DB) Table() store.Table { return &Table{db: db} }

// Blobs is the store.Blobs of this database.
func (db *DB) Blobs() store.Blobs { return &Blobs{db: db} }

// Queue is the durable delay queue called name, created on first use. All
// calls with one name share one queue (and its wake-ups).
func (db *DB) Queue(name string) *Queue {
	db.mu.Lock()
	defer db.mu.Unlock()
	if q, ok := db.queues[name]; ok {
		return q
	}
	q := &Queue{db: db, name: name, wake: make(chan struct{})}
	db.queues[name] = q
	return q
}

// unavailable marks a bbolt failure (I/O, a closed file) as an outage, the
// way the AWS adapters mark a service that does not answer.
func unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	return store.Unavailable(op, err)
}

// update runs fn in a write transaction. Errors fn returns (condition
// failures, not-found, ...) come back as they are; a failure of bbolt itself
// (a closed file, a failed commit) is an outage.
func (db *DB) update(op string, fn func(tx *bolt.Tx) error) error {
	if err := db.checkOpen(op); err != nil {
		return err
	}
	db.txs.RLock()
	defer db.txs.RUnlock()
	return transact(op, db.bolt.Update, fn)
}

// view is update's read-only twin.
func (db *DB) view(op string, fn func(tx *bolt.Tx) error) error {
	if err := db.checkOpen(op); err != nil {
		return err
	}
	db.txs.RLock()
	defer db.txs.RUnlock()
	return transact(op, db.bolt.View, fn)
}

// checkOpen refuses a call that starts once Close has begun. Close wakes
// receivers before bbolt takes its own lock, so without this check a call
// made after a receiver saw ErrClosed could still slip into the file and
// succeed.
func (db *DB) checkOpen(op string) error {
	select {
	case <-db.closed:
		return store.Unavailable(op, ErrClosed)
	default:
		return nil
	}
}

// transact runs fn in a transaction of run (bbolt's Update or View),
// telling fn's own errors from bbolt's.
func transact(op string, run func(func(*bolt.Tx) error) error, fn func(tx *bolt.Tx) error) error {
	var fnErr error
	err := run(func(tx *bolt.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return unavailable(op, err)
}

// Keys lists every key of the file, in every bucket and nested bucket
// (a blob, stored as a bucket of its own, is one key), as its bucket path
// and key joined by "/" (a table key shows its partition
// and sort key separated by NUL, as stored). It is how an operator, or a
// test, sees everything a deletion should have removed: the whole file,
// not what the stores' own reads choose to show.
func (db *DB) Keys() ([]string, error) {
	var out []string
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			key := path + "/" + string(k)
			// A nested bucket, but a blob's bucket is one blob.
			if v == nil && path != string(bucketBlobs) {
				return walk(key, b.Bucket(k))
			}
			out = append(out, key)
			return nil
		})
	}
	err := db.view("keys", func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	return out, err
}
