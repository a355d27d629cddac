package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

// blobKey is a key unique to the subtest and run, in the shape durachat
// uses: an escaped tenant (so a literal '%') between slashes.
func blobKey(name string) string {
	return fmt.Sprintf("storetest/te%%40nant-%d/%s", rand.Uint64(), name)
}

// TestBlobs checks the store.Blobs contract.
func TestBlobs(t *testing.T, newBlobs func(t *testing.T) store.Blobs) {
	t.Run("PutThenGetAndHeadRoundTrip", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		tests := []struct {
			name string
			blob store.Blob
		}{
			{"png", store.Blob{ContentType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\x00binary\xff")}},
			{"text", store.Blob{ContentType: "text/plain; charset=utf-8", Data: []byte("héllo\n")}},
			{"large", store.Blob{ContentType: "image/jpeg", Data: randomBytes(3 << 20)}},
		}
		for _, tt := range tests {
			key := blobKey(tt.name)
			must(t, blobs.Put(ctx, key, tt.blob))
			got, err := blobs.Get(ctx, key)
			must(t, err)
			if got.ContentType != tt.blob.ContentType || !bytes.Equal(got.Data, tt.blob.Data) {
				t.Errorf("%s: Get = %q, %d bytes; want %q, %d bytes as put", tt.name, got.ContentType, len(got.Data), tt.blob.ContentType, len(tt.blob.Data))
			}
			info, err := blobs.Head(ctx, key)
			must(t, err)
			if info.ContentType != tt.blob.ContentType || info.Size != int64(len(tt.blob.Data)) {
				t.Errorf("%s: Head = %+v, want %q and size %d", tt.name, info, tt.blob.ContentType, len(tt.blob.Data))
			}
		}
	})

	t.Run("PutIsCreateOnce", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		key := blobKey("once")
		first := store.Blob{ContentType: "image/png", Data: []byte("first")}
		must(t, blobs.Put(ctx, key, first))
		if err := blobs.Put(ctx, key, store.Blob{ContentType: "image/gif", Data: []byte("second, longer")}); err != nil {
			t.Fatalf("second Put of one key = %v, want success", err)
		}
		got, err := blobs.Get(ctx, key)
		must(t, err)
		if got.ContentType != first.ContentType || !bytes.Equal(got.Data, first.Data) {
			t.Fatalf("after a second Put: %q %q, want the first object kept", got.ContentType, got.Data)
		}
	})

	t.Run("ConcurrentPutsOfOneKeyAllSucceedWithOneContent", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		key := blobKey("race")
		const n = 10
		puts := make([]store.Blob, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			puts[i] = store.Blob{ContentType: fmt.Sprintf("application/x-put-%d", i), Data: []byte(fmt.Sprintf("content of put %d", i))}
			wg.Go(func() { errs[i] = blobs.Put(ctx, key, puts[i]) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("put %d: %v, want success", i, err)
			}
		}
		got, err := blobs.Get(ctx, key)
		must(t, err)
		for _, p := range puts {
			if got.ContentType == p.ContentType {
				if !bytes.Equal(got.Data, p.Data) {
					t.Fatalf("stored %q with the content of another put: %q", got.ContentType, got.Data)
				}
				return
			}
		}
		t.Fatalf("stored %q %q, which no put wrote", got.ContentType, got.Data)
	})

	t.Run("MissingIsNotFoundNotUnavailable", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		key := blobKey("missing")
		_, err := blobs.Get(ctx, key)
		if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Get of a missing key = %v, want ErrNotFound and not ErrUnavailable", err)
		}
		_, err = blobs.Head(ctx, key)
		if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Head of a missing key = %v, want ErrNotFound and not ErrUnavailable", err)
		}
	})

	t.Run("DeleteRemovesAndAllowsPutAgain", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		key := blobKey("deleted")
		must(t, blobs.Put(ctx, key, store.Blob{ContentType: "text/plain", Data: []byte("old")}))
		must(t, blobs.Delete(ctx, key))
		if _, err := blobs.Head(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Head after Delete = %v, want ErrNotFound", err)
		}
		must(t, blobs.Delete(ctx, key)) // deleting nothing is no error
		must(t, blobs.Put(ctx, key, store.Blob{ContentType: "text/plain", Data: []byte("new")}))
		got, err := blobs.Get(ctx, key)
		must(t, err)
		if string(got.Data) != "new" {
			t.Fatalf("Get after a put following Delete = %q, want the new bytes", got.Data)
		}
	})

	t.Run("ListGivesThePrefixsKeysInOrderAPageAtATime", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		base := fmt.Sprintf("storetest/%d/", rand.Uint64())
		want := []string{base + "a/1", base + "a/2", base + "a/3", base + "a/z/4", base + "a/é"}
		for _, k := range append([]string{base + "b/1", base + "a"}, want...) {
			must(t, blobs.Put(ctx, k, store.Blob{ContentType: "text/plain", Data: []byte(k)}))
		}
		var got []string
		after := ""
		for range len(want) + 1 {
			page, err := blobs.List(ctx, base+"a/", after, 2)
			must(t, err)
			if len(page) > 2 {
				t.Fatalf("List with limit 2 gave %d keys", len(page))
			}
			got = append(got, page...)
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("List pages = %q, want %q: the prefix's keys in byte order, each once", got, want)
		}
		must(t, blobs.Delete(ctx, base+"a/2"))
		if all, err := blobs.List(ctx, base+"a/", "", 100); err != nil || len(all) != len(want)-1 {
			t.Fatalf("List after a delete = %q, %v, want %d keys", all, err, len(want)-1)
		}
		if none, err := blobs.List(ctx, base+"none/", "", 10); err != nil || len(none) != 0 {
			t.Fatalf("List of an empty prefix = %q, %v, want nothing", none, err)
		}
	})

	t.Run("KeysAreExact", func(t *testing.T) {
		ctx, blobs := testContext(t), newBlobs(t)
		// An escaped and an unescaped spelling are two keys, not one.
		base := fmt.Sprintf("storetest/%d/", rand.Uint64())
		escaped, plain := base+"a%40b/x", base+"a@b/x"
		must(t, blobs.Put(ctx, escaped, store.Blob{ContentType: "text/plain", Data: []byte("escaped")}))
		if _, err := blobs.Get(ctx, plain); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get(%q) after putting only %q = %v, want ErrNotFound", plain, escaped, err)
		}
		must(t, blobs.Put(ctx, plain, store.Blob{ContentType: "text/plain", Data: []byte("plain")}))
		for key, want := range map[string]string{escaped: "escaped", plain: "plain"} {
			got, err := blobs.Get(ctx, key)
			must(t, err)
			if string(got.Data) != want {
				t.Fatalf("Get(%q) = %q, want %q", key, got.Data, want)
			}
		}
	})
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}
