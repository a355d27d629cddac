package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/durachat/durachat/shared/store"
)

// secrets are what a test stores and then removes: a text and an image's
// bytes (large enough to span overflow pages), each distinct per test.
type secrets struct {
	text  string
	image []byte
}

func newSecrets() secrets {
	img := make([]byte, 20<<10)
	rand.Read(img)
	return secrets{text: "passport " + rand.Text(), image: img}
}

// fileHolds lists which of s every file of dir still holds: the text, the
// image's bytes (a 64-byte run of them is enough to tell) or either in
// base64.
func fileHolds(t *testing.T, dir string, s secrets) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	needles := map[string][]byte{
		"text":          []byte(s.text),
		"image":         s.image[1000:1064],
		"text base64":   []byte(base64.StdEncoding.EncodeToString([]byte(s.text))[:16]),
		"image base64":  []byte(base64.StdEncoding.EncodeToString(s.image)[1200:1264]),
		"image at rest": s.image[len(s.image)-64:],
	}
	var found []string
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for what, n := range needles {
			if bytes.Contains(raw, n) {
				found = append(found, e.Name()+": "+what)
			}
		}
	}
	return found
}

// fill writes n items around the secrets, so they share pages with items
// that stay.
func fill(t *testing.T, db *DB, pk string, n int) {
	t.Helper()
	items := make([]store.Item, n)
	for i := range items {
		items[i] = store.Item{Key: store.Key{PK: pk, SK: fmt.Sprintf("f/%04d", i)}, Body: bytes.Repeat([]byte{'x'}, 300)}
	}
	if err := (&Table{db: db}).CreateAll(t.Context(), items); err != nil {
		t.Fatal(err)
	}
}

// TestNoRemovedBytesAreLeftInTheFile: whatever removes an item or a blob
// (a delete, an update that replaces it, the purge of an expired one),
// once Scrub has run no byte of it is left anywhere in the data
// directory, while every item that stays reads back as written. Before
// Scrub the bytes are there (bbolt leaves freed pages as they were), which
// is what the check is for.
func TestNoRemovedBytesAreLeftInTheFile(t *testing.T) {
	ctx := t.Context()
	secretKey := store.Key{PK: "c/t/chat", SK: "e/0007"}
	imageKey := "images/t/0123456789abcdef"
	cases := []struct {
		name   string
		store  func(t *testing.T, db *DB, s secrets)
		remove func(t *testing.T, db *DB)
	}{
		{"table delete", putSecretItem(secretKey, 0), func(t *testing.T, db *DB) {
			must(t, db.Table().Delete(ctx, secretKey, 0))
		}},
		{"table update", putSecretItem(secretKey, 0), func(t *testing.T, db *DB) {
			must(t, db.Table().Update(ctx, store.Item{Key: secretKey, Version: 2, Body: []byte(`{"erased":true}`)}))
		}},
		{"purge expired", putSecretItem(secretKey, 1), func(t *testing.T, db *DB) {
			n, err := db.PurgeExpired(ctx)
			must(t, err)
			if n != 1 {
				t.Fatalf("purged %d items, want 1", n)
			}
		}},
		{"blob delete", func(t *testing.T, db *DB, s secrets) {
			must(t, db.Blobs().Put(ctx, imageKey, store.Blob{ContentType: "image/png", Data: s.image}))
			must(t, db.Blobs().Put(ctx, imageKey+".txt", store.Blob{ContentType: "text/plain", Data: []byte(s.text)}))
		}, func(t *testing.T, db *DB) {
			must(t, db.Blobs().Delete(ctx, imageKey))
			must(t, db.Blobs().Delete(ctx, imageKey+".txt"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir)
			must(t, err)
			defer db.Close()
			s := newSecrets()
			fill(t, db, secretKey.PK, 50)
			c.store(t, db, s)
			fill(t, db, "c/t/other", 50) // later writes that free pages too
			c.remove(t, db)
			if found := fileHolds(t, dir, s); len(found) == 0 {
				t.Fatalf("before Scrub the file holds none of the removed bytes: the check cannot fail")
			}
			if err := db.Scrub(ctx); err != nil {
				t.Fatal(err)
			}
			if found := fileHolds(t, dir, s); len(found) > 0 {
				t.Fatalf("after Scrub the data directory still holds %q", found)
			}
			checkIntact(t, db, 50)
		})
	}
}

func putSecretItem(k store.Key, expires int64) func(t *testing.T, db *DB, s secrets) {
	return func(t *testing.T, db *DB, s secrets) {
		body := fmt.Sprintf(`{"text":%q,"image":%q}`, s.text, base64.StdEncoding.EncodeToString(s.image))
		if err := db.Table().Create(t.Context(), store.Item{Key: k, Body: []byte(body), Expires: expires}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIntact reads back the n filler items of both partitions and has
// bbolt check the file's structure.
func checkIntact(t *testing.T, db *DB, n int) {
	t.Helper()
	for _, pk := range []string{"c/t/chat", "c/t/other"} {
		page, err := db.Table().Query(t.Context(), store.Query{PK: pk, Prefix: "f/"})
		must(t, err)
		if len(page.Items) != n {
			t.Fatalf("%s reads %d filler items, want %d", pk, len(page.Items), n)
		}
		for _, it := range page.Items {
			if !bytes.Equal(it.Body, bytes.Repeat([]byte{'x'}, 300)) {
				t.Fatalf("%s/%s reads %q", it.PK, it.SK, it.Body)
			}
		}
	}
	must(t, db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
}

// TestAFileLeftUnscrubbedIsScrubbedWhenOpened: a process that ended
// between a deletion and its scrub leaves the bytes in the file; the
// next Open removes them before anything reads the file.
func TestAFileLeftUnscrubbedIsScrubbedWhenOpened(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, err := Open(dir)
	must(t, err)
	s := newSecrets()
	k := store.Key{PK: "c/t/chat", SK: "e/0007"}
	fill(t, db, k.PK, 50)
	putSecretItem(k, 0)(t, db, s)
	fill(t, db, "c/t/other", 50)
	must(t, db.Table().Delete(ctx, k, 0))
	must(t, db.Close())
	if found := fileHolds(t, dir, s); len(found) == 0 {
		t.Fatalf("the closed file holds none of the deleted bytes: the check cannot fail")
	}
	db, err = Open(dir)
	must(t, err)
	defer db.Close()
	if found := fileHolds(t, dir, s); len(found) > 0 {
		t.Fatalf("after Open the data directory still holds %q", found)
	}
	checkIntact(t, db, 50)
}

// TestScrubAmidReadsAndWritesKeepsEveryItem: Scrub runs while other calls
// read, write and delete; each waits for the other, no live page is
// overwritten, and every item written reads back.
func TestScrubAmidReadsAndWritesKeepsEveryItem(t *testing.T) {
	ctx := t.Context()
	db, err := Open(t.TempDir())
	must(t, err)
	defer db.Close()
	const writers, each = 4, 60
	body := func(w, i int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 200+i) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Scrub(context.Background()); err != nil {
				errs <- err
				return
			}
		}
	}()
	var ww sync.WaitGroup
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			tbl := db.Table()
			for i := range each {
				k := store.Key{PK: fmt.Sprintf("c/t/%d", w), SK: fmt.Sprintf("e/%04d", i)}
				if err := tbl.Create(ctx, store.Item{Key: k, Body: body(w, i)}); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 { // every third goes again
					if err := tbl.Delete(ctx, k, 0); err != nil {
						errs <- err
						return
					}
				}
				if _, err := tbl.Get(ctx, store.Key{PK: k.PK, SK: fmt.Sprintf("e/%04d", i/2)}); err != nil && !isNotFound(err) {
					errs <- err
					return
				}
			}
		}()
	}
	ww.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		page, err := db.Table().Query(ctx, store.Query{PK: fmt.Sprintf("c/t/%d", w)})
		must(t, err)
		if want := each - (each+2)/3; len(page.Items) != want {
			t.Fatalf("writer %d: %d items, want %d", w, len(page.Items), want)
		}
		for _, it := range page.Items {
			var i int
			fmt.Sscanf(it.SK, "e/%04d", &i)
			if !bytes.Equal(it.Body, body(w, i)) {
				t.Fatalf("%s/%s reads %d bytes %.8q, want what was written", it.PK, it.SK, len(it.Body), it.Body)
			}
		}
	}
	must(t, db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkScrub measures a scrub after a chat's deletion, in a file of
// other chats: the deletion frees its pages (size MiB of items), and the
// scrub reads the file's free pages and zeroes them. The second case is
// the scrub after that, with nothing new to zero: what the next deletion
// pays for the free space left behind.
func BenchmarkScrub(b *testing.B) {
	for _, mib := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("after deleting %dMiB of a %dMiB file", mib, 2*mib), func(b *testing.B) {
			benchScrub(b, mib, true)
		})
		b.Run(fmt.Sprintf("nothing new, %dMiB free", mib), func(b *testing.B) {
			benchScrub(b, mib, false)
		})
	}
}

func benchScrub(b *testing.B, mib int, deleteEach bool) {
	ctx := b.Context()
	db, err := Open(b.TempDir())
	must(b, err)
	defer db.Close()
	tbl := &Table{db: db}
	n := mib << 10 // 1 KiB items
	load := func(pk string) {
		items := make([]store.Item, 0, 1000)
		for i := range n {
			items = append(items, store.Item{Key: store.Key{PK: pk, SK: fmt.Sprintf("e/%08d", i)}, Body: bytes.Repeat([]byte{'y'}, 1000)})
			if len(items) == cap(items) || i == n-1 {
				must(b, tbl.CreateAll(ctx, items))
				items = items[:0]
			}
		}
	}
	remove := func(pk string) {
		for i := 0; i < n; i += 1000 {
			must(b, db.update("bench delete", func(tx *bolt.Tx) error {
				bk := tx.Bucket(bucketTable)
				for j := i; j < min(i+1000, n); j++ {
					if err := bk.Delete(tableKey(store.Key{PK: pk, SK: fmt.Sprintf("e/%08d", j)})); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}
	load("c/t/stays")
	if !deleteEach {
		load("c/t/gone")
		remove("c/t/gone")
		_, err := db.scrub(ctx)
		must(b, err)
	}
	var zeroed int64
	for b.Loop() {
		if deleteEach {
			b.StopTimer()
			load("c/t/gone")
			remove("c/t/gone")
			b.StartTimer()
		}
		st, err := db.scrub(ctx)
		must(b, err)
		zeroed += st.ZeroedBytes
	}
	b.ReportMetric(float64(zeroed)/float64(b.N)/(1<<20), "MiB-zeroed/op")
}

// TestTheScrubReadsTheFirstPageOfEachItemOnly: the walk of the file's
// pages (at every open) finds the free runs a walk of every page finds,
// while reading only the first page of each item in use (and each free
// page, which it zeroes): a blob's
// overflow pages are skipped unread, so opening a file of large images
// does not bring them all into memory.
func TestTheScrubReadsTheFirstPageOfEachItemOnly(t *testing.T) {
	ctx := t.Context()
	db, err := Open(t.TempDir())
	must(t, err)
	defer db.Close()
	img := make([]byte, 1<<20)
	for i := range 4 {
		rand.Read(img)
		must(t, db.Blobs().Put(ctx, fmt.Sprintf("images/t/%016d", i), store.Blob{ContentType: "image/png", Data: img}))
	}
	must(t, db.Blobs().Delete(ctx, fmt.Sprintf("images/t/%016d", 1))) // a free run between blobs

	type run struct{ from, to int64 }
	must(t, db.bolt.View(func(tx *bolt.Tx) error {
		inUse := tx.Size() / int64(tx.DB().Info().PageSize)
		var want []run
		start := int64(-1)
		for id := int64(2); id <= inUse; id++ { // every page, one at a time
			free := false
			if id < inUse {
				f, _, err := txPages(tx)(id)
				must(t, err)
				free = f
			}
			switch {
			case free && start < 0:
				start = id
			case !free && start >= 0:
				want, start = append(want, run{start, id}), -1
			}
		}
		var got []run
		read := int64(0)
		page := txPages(tx)
		must(t, freeRuns(inUse, func(id int64) (bool, int64, error) { read++; return page(id) }, func(from, to int64) error {
			got = append(got, run{from, to})
			return nil
		}))
		if fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 {
			t.Errorf("free runs %v, want %v (a walk of every page)", got, want)
		}
		free := int64(0)
		for _, r := range want {
			free += r.to - r.from
		}
		// Each free page is read (and zeroed) on its own.
		if live := inUse - free; read-free > live/10 {
			t.Errorf("the walk read %d of the %d pages in use, want at most a tenth: the first page of each item", read-free, live)
		}
		return nil
	}))
}
