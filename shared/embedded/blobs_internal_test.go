package embedded

import (
	"bytes"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/durachat/durachat/shared/store"
)

// A data file written before blobs had buckets of their own holds each
// blob as one value. Such a blob still reads back, is still found by a put
// of its key (which leaves it as it is), and is still deleted.
func TestABlobStoredAsOneValueStillReadsPutsAndDeletes(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := store.Blob{ContentType: "image/png", Data: []byte("old bytes")}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).Put([]byte("images/a"), encodeBlob(old))
	})
	if err != nil {
		t.Fatal(err)
	}
	blobs, ctx := db.Blobs(), t.Context()
	if err := blobs.Put(ctx, "images/a", store.Blob{ContentType: "image/jpeg", Data: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	got, err := blobs.Get(ctx, "images/a")
	if err != nil || got.ContentType != old.ContentType || !bytes.Equal(got.Data, old.Data) {
		t.Fatalf("Get = %q %q, %v; want the blob as first stored", got.ContentType, got.Data, err)
	}
	info, err := blobs.Head(ctx, "images/a")
	if err != nil || info.Size != int64(len(old.Data)) {
		t.Fatalf("Head = %+v, %v", info, err)
	}
	if err := blobs.Delete(ctx, "images/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Get(ctx, "images/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want not found", err)
	}
}

// Putting a blob writes that blob, not its neighbours again: the pages
// bbolt allocates for a put of a small blob beside large ones stay small.
func TestAPutDoesNotWriteItsNeighboursAgain(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	blobs, ctx := db.Blobs(), t.Context()
	large := bytes.Repeat([]byte("x"), 4<<20)
	for _, k := range []string{"k/a", "k/c", "k/e"} {
		if err := blobs.Put(ctx, k, store.Blob{ContentType: "text/plain", Data: large}); err != nil {
			t.Fatal(err)
		}
	}
	st := db.bolt.Stats()
	before := st.TxStats.GetPageAlloc()
	if err := blobs.Put(ctx, "k/b", store.Blob{ContentType: "text/plain", Data: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	st = db.bolt.Stats()
	if written := st.TxStats.GetPageAlloc() - before; written > 64<<10 {
		t.Fatalf("a put of 5 bytes beside 4 MiB blobs wrote %d bytes of pages", written)
	}
}
