package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// scrubChunk is how much of the file Scrub reads (and, when it is not
// zero already, overwrites) at a time.
const scrubChunk = 1 << 20

// errScrubbed ends Scrub's write transaction without a commit: it only
// reads bbolt's page map, and a commit would free a page of its own.
var errScrubbed = errors.New("scrubbed")

// ScrubStats is what one scrub did.
type ScrubStats struct {
	// FreePages is how many pages of the file held no live data.
	FreePages int
	// ZeroedBytes is how much of them (and of the file past its last
	// page in use) held something and was overwritten with zeros.
	ZeroedBytes int64
}

// Scrub overwrites with zeros every page of the file that holds no live
// data: the pages bbolt freed when a write replaced or deleted what they
// held, and the file's room past its last page in use. bbolt writes every
// change to new pages (copy on write) and leaves the freed ones as they
// were, so until Scrub runs a deleted item's bytes are still in the file,
// readable by anyone who reads the file. Once Scrub returns, nothing the
// stores no longer hold is left in the file: every copy of it was on a
// page that is free now.
//
// Scrub waits for the transactions in flight and holds off new ones while
// it runs: with none open, every page bbolt keeps for a reader's older
// snapshot (its pending pages) is released to the free list, and no
// reader can be looking at a page it overwrites. Its cost is reading the
// free pages (and writing those that are not zero already), a few
// milliseconds per MiB free; a file with no free pages costs a walk of its
// page map, reading the first page of each item (not its overflow). It is safe to call any number of times; Open calls it, so a
// file left unscrubbed by a crash is scrubbed at the next start.
func (db *DB) Scrub(ctx context.Context) error {
	_, err := db.scrub(ctx)
	return err
}

// scrub is Scrub, telling what it did.
func (db *DB) scrub(ctx context.Context) (ScrubStats, error) {
	if err := db.checkOpen("scrub"); err != nil {
		return ScrubStats{}, err
	}
	db.txs.Lock()
	defer db.txs.Unlock()
	f, err := os.OpenFile(db.path, os.O_RDWR, 0)
	if err != nil {
		return ScrubStats{}, unavailable("scrub", err)
	}
	defer f.Close()
	var st ScrubStats
	var fnErr error
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		st, fnErr = scrubFree(ctx, tx, f)
		if fnErr != nil {
			return fnErr
		}
		return errScrubbed
	})
	if fnErr != nil {
		return st, fnErr
	}
	if !errors.Is(err, errScrubbed) {
		return st, unavailable("scrub", err)
	}
	if st.ZeroedBytes > 0 {
		if err := f.Sync(); err != nil {
			return st, unavailable("scrub", err)
		}
	}
	return st, nil
}

// scrubFree zeroes the free pages of tx's file f, and the file past the
// pages in use. tx is the only transaction open, so bbolt has released
// every pending page to the free list, and no one reads a free page or
// writes the file until tx ends.
func scrubFree(ctx context.Context, tx *bolt.Tx, f *os.File) (ScrubStats, error) {
	pageSize := int64(tx.DB().Info().PageSize)
	inUse := tx.Size() / pageSize // pages 0 .. inUse-1 are bbolt's
	var st ScrubStats
	buf := make([]byte, scrubChunk)
	zero := func(from, to int64) error {
		for off := from; off < to; off += scrubChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := f.ReadAt(buf[:min(scrubChunk, to-off)], off)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("embedded: scrub: reading at %d: %w", off, err)
			}
			if isZero(buf[:n]) {
				continue
			}
			clear(buf[:n])
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return fmt.Errorf("embedded: scrub: writing at %d: %w", off, err)
			}
			st.ZeroedBytes += int64(n)
		}
		return nil
	}
	if err := freeRuns(inUse, txPages(tx), func(from, to int64) error {
		st.FreePages += int(to - from)
		return zero(from*pageSize, to*pageSize)
	}); err != nil {
		return st, err
	}
	fi, err := f.Stat()
	if err != nil {
		return st, fmt.Errorf("embedded: scrub: %w", err)
	}
	return st, zero(inUse*pageSize, fi.Size())
}

// pageAt reads what the walk of the file's pages needs of one: whether it
// is free, and how many pages after it hold the rest of it.
type pageAt func(id int64) (free bool, overflow int64, err error)

func txPages(tx *bolt.Tx) pageAt {
	return func(id int64) (bool, int64, error) {
		info, err := tx.Page(int(id))
		if err != nil || info == nil {
			return false, 0, err
		}
		if info.Type == "free" {
			return true, 0, nil
		}
		return false, int64(info.OverflowCount), nil
	}
}

// freeRuns calls run with each run [from, to) of free pages among pages
// 2 to inUse-1 (0 and 1 are the meta pages), in order. A page in use is
// read once and the pages of its overflow are skipped unread: they are
// its own, never free, and reading each page's header (a blob is
// overflow pages almost all) brought the whole file into memory at every
// open.
func freeRuns(inUse int64, page pageAt, run func(from, to int64) error) error {
	start := int64(-1)
	for id := int64(2); id < inUse; {
		free, overflow, err := page(id)
		if err != nil {
			return fmt.Errorf("embedded: scrub: page %d: %w", id, err)
		}
		if free {
			if start < 0 {
				start = id
			}
			id++
			continue
		}
		if start >= 0 {
			if err := run(start, id); err != nil {
				return err
			}
			start = -1
		}
		id += 1 + overflow
	}
	if start >= 0 {
		return run(start, inUse)
	}
	return nil
}

func isZero(b []byte) bool {
	// Compared a page's worth at a time against zeros.
	var zeros [4096]byte
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
