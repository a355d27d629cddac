// Package storetest is the conformance suite every adapter of shared/store
// passes: the embedded (bbolt) one and the AWS ones (DynamoDB, S3, SQS). Each
// subtest is named after the rule it checks. The suite assumes nothing an
// adapter is free to choose: not the receipt format, not sub-second timing.
//
// An adapter's test calls, for example:
//
//	func TestTableConformance(t *testing.T) {
//		storetest.TestTable(t, func(t *testing.T) store.Table { return newTable(t) })
//	}
//
// The constructors are called once per subtest, possibly from parallel
// subtests, and must give a store no other subtest sees (or, for a table, one
// where other subtests' partitions do not matter: each subtest uses its own).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// opTimeout bounds each subtest, so a hung backend fails instead of
// stalling the run.
const opTimeout = 60 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// partition is a partition key unique to the subtest (and the run), so
// backends shared between subtests still isolate them.
func partition(t *testing.T) string {
	return fmt.Sprintf("storetest/%s/%d", t.Name(), rand.Uint64())
}

// TestTable checks the store.Table contract.
func TestTable(t *testing.T, newTable func(t *testing.T) store.Table) {
	t.Run("CreateWritesVersionOne", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "meta"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`{"a":1}`), Version: 7}))
		got, err := tbl.Get(ctx, k)
		must(t, err)
		if got.Key != k || got.Version != 1 || string(got.Body) != `{"a":1}` || got.Expires != 0 {
			t.Fatalf("Get = %+v (body %q), want key %v, version 1, the body written, no expiry", got, got.Body, k)
		}
	})

	t.Run("CreateKeepsExpires", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "state"}
		exp := time.Now().Add(48 * time.Hour).Unix()
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`{}`), Expires: exp}))
		got, err := tbl.Get(ctx, k)
		must(t, err)
		if got.Expires != exp {
			t.Fatalf("Expires = %d, want %d", got.Expires, exp)
		}
	})

	t.Run("CreateIsOnce", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "e/1"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"first"`)}))
		err := tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"second"`)})
		if !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("second Create = %v, want ErrConditionFailed", err)
		}
		got, err := tbl.Get(ctx, k)
		must(t, err)
		if string(got.Body) != `"first"` || got.Version != 1 {
			t.Fatalf("after a refused create: body %q version %d, want the first write kept", got.Body, got.Version)
		}
	})

	t.Run("DeleteRemovesAndAllowsCreateAgain", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "e/1"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"old"`)}))
		must(t, tbl.Delete(ctx, k, 0))
		if _, err := tbl.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
		}
		must(t, tbl.Delete(ctx, k, 0)) // deleting nothing is no error
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"new"`)}))
		got, err := tbl.Get(ctx, k)
		must(t, err)
		if got.Version != 1 || string(got.Body) != `"new"` {
			t.Fatalf("recreated item: version %d body %q, want version 1 and the new body", got.Version, got.Body)
		}
	})

	t.Run("DeleteWithVersionIsConditional", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "state"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
		must(t, tbl.Update(ctx, store.Item{Key: k, Version: 2, Body: []byte(`2`)}))
		if err := tbl.Delete(ctx, k, 1); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("Delete at a stale version = %v, want ErrConditionFailed", err)
		}
		if _, err := tbl.Get(ctx, k); err != nil {
			t.Fatalf("a refused Delete removed the item: %v", err)
		}
		must(t, tbl.Delete(ctx, k, 2))
		if _, err := tbl.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
		}
		if err := tbl.Delete(ctx, k, 2); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("versioned Delete of a missing item = %v, want ErrConditionFailed", err)
		}
	})

	t.Run("UpdateWithNextVersionWrites", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "state"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
		for v := int64(2); v <= 4; v++ {
			body := fmt.Sprint(v)
			must(t, tbl.Update(ctx, store.Item{Key: k, Version: v, Body: []byte(body)}))
			got, err := tbl.Get(ctx, k)
			must(t, err)
			if got.Version != v || string(got.Body) != body {
				t.Fatalf("after update to %d: version %d body %q", v, got.Version, got.Body)
			}
		}
	})

	t.Run("UpdateWithStaleVersionFails", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "state"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"v1"`)}))
		must(t, tbl.Update(ctx, store.Item{Key: k, Version: 2, Body: []byte(`"winner"`)}))
		for _, v := range []int64{2, 1, 4} { // a lost race, an older writer, a skipped version
			err := tbl.Update(ctx, store.Item{Key: k, Version: v, Body: []byte(`"loser"`)})
			if !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("Update with version %d over version 2 = %v, want ErrConditionFailed", v, err)
			}
		}
		got, err := tbl.Get(ctx, k)
		must(t, err)
		if got.Version != 2 || string(got.Body) != `"winner"` {
			t.Fatalf("after refused updates: version %d body %q, want 2 \"winner\"", got.Version, got.Body)
		}
	})

	t.Run("UpdateOfMissingItemFails", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		k := store.Key{PK: pk, SK: "state"}
		err := tbl.Update(ctx, store.Item{Key: k, Version: 2, Body: []byte(`{}`)})
		if !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("Update of a missing item = %v, want ErrConditionFailed", err)
		}
		if _, err := tbl.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after a refused update, Get = %v, want ErrNotFound (nothing written)", err)
		}
	})

	t.Run("GetMissingIsNotFoundNotUnavailable", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk, SK: "e/1"}, Body: []byte(`{}`)}))
		for _, k := range []store.Key{{PK: pk, SK: "e/2"}, {PK: pk + "-other", SK: "e/1"}} {
			_, err := tbl.Get(ctx, k)
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get(%v) = %v, want ErrNotFound", k, err)
			}
			if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("Get(%v) = %v: a missing item must not read as an outage or a conflict", k, err)
			}
		}
	})

	t.Run("ItemSizeLimit", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		over := sizedItem(store.Key{PK: pk, SK: "big"}, store.MaxItemSize+1)
		if err := tbl.Create(ctx, over); !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("Create of a %d-byte item = %v, want ErrTooLarge", over.Size(), err)
		}
		if _, err := tbl.Get(ctx, over.Key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after a refused oversize create, Get = %v, want ErrNotFound", err)
		}

		at := sizedItem(store.Key{PK: pk, SK: "fits"}, store.MaxItemSize)
		must(t, tbl.Create(ctx, at))
		got, err := tbl.Get(ctx, at.Key)
		must(t, err)
		if string(got.Body) != string(at.Body) {
			t.Fatalf("item of exactly the limit came back with %d body bytes, want %d", len(got.Body), len(at.Body))
		}

		grown := sizedItem(at.Key, store.MaxItemSize+1)
		grown.Version = 2
		if err := tbl.Update(ctx, grown); !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("Update growing an item past the limit = %v, want ErrTooLarge", err)
		}
		got, err = tbl.Get(ctx, at.Key)
		must(t, err)
		if got.Version != 1 || len(got.Body) != len(at.Body) {
			t.Fatalf("after a refused oversize update: version %d, %d body bytes; want the old item", got.Version, len(got.Body))
		}
	})

	t.Run("QueryFiltersByPrefix", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		for _, sk := range []string{"a/2", "b/1", "a/1", "ab", "a", "a/3/x"} {
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk, SK: sk}, Body: []byte(`"` + sk + `"`)}))
		}
		must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk + "-other", SK: "a/0"}, Body: []byte(`{}`)}))
		tests := []struct {
			prefix string
			desc   bool
			want   []string
		}{
			{prefix: "a/", want: []string{"a/1", "a/2", "a/3/x"}},
			{prefix: "a/", desc: true, want: []string{"a/3/x", "a/2", "a/1"}},
			{prefix: "a", want: []string{"a", "a/1", "a/2", "a/3/x", "ab"}},
			{prefix: "", want: []string{"a", "a/1", "a/2", "a/3/x", "ab", "b/1"}},
			{prefix: "", desc: true, want: []string{"b/1", "ab", "a/3/x", "a/2", "a/1", "a"}},
			{prefix: "c", want: nil},
		}
		for _, tt := range tests {
			page, err := tbl.Query(ctx, store.Query{PK: pk, Prefix: tt.prefix, Desc: tt.desc})
			must(t, err)
			if got := sortKeys(page.Items); !slices.Equal(got, tt.want) || page.Next != "" {
				t.Errorf("Query(prefix %q, desc %v) = %q next %q, want %q and no next", tt.prefix, tt.desc, got, page.Next, tt.want)
			}
			for _, it := range page.Items {
				if it.PK != pk || string(it.Body) != `"`+it.SK+`"` || it.Version != 1 {
					t.Errorf("Query returned %+v (body %q): want its own partition, body and version", it.Key, it.Body)
				}
			}
		}
	})

	t.Run("QueryPaginatesWithoutGapsOrDuplicates", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		const n = 250
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("e/%05d", i)
		}
		for _, i := range rand.Perm(n) { // write out of order: the store sorts
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk, SK: want[i]}, Body: []byte(`{}`)}))
		}
		must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk, SK: "f/0"}, Body: []byte(`{}`)}))
		for _, desc := range []bool{false, true} {
			var got []string
			var sizes []int
			q := store.Query{PK: pk, Prefix: "e/", Limit: 100, Desc: desc}
			for pages := 0; ; pages++ {
				if pages > 5 {
					t.Fatalf("desc %v: more than 5 pages; Next never ends (last %q)", desc, q.After)
				}
				page, err := tbl.Query(ctx, q)
				must(t, err)
				sizes = append(sizes, len(page.Items))
				got = append(got, sortKeys(page.Items)...)
				if page.Next == "" {
					break
				}
				if last := page.Items[len(page.Items)-1].SK; page.Next != last {
					t.Fatalf("desc %v: Next = %q, want the last sort key of the page %q", desc, page.Next, last)
				}
				q.After = page.Next
			}
			w := slices.Clone(want)
			if desc {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Fatalf("desc %v: pages gave %d keys (%q ... ), want all %d in order once", desc, len(got), head(got), n)
			}
			if !slices.Equal(sizes, []int{100, 100, 50}) {
				t.Fatalf("desc %v: page sizes %v, want [100 100 50]", desc, sizes)
			}
		}
	})

	t.Run("QueryAfterIsExclusive", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		for i := range 5 {
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: pk, SK: fmt.Sprintf("e/%d", i*2)}, Body: []byte(`{}`)}))
		}
		tests := []struct {
			after string
			desc  bool
			limit int
			want  []string
			next  string
		}{
			{after: "e/2", want: []string{"e/4", "e/6", "e/8"}},
			{after: "e/2", desc: true, want: []string{"e/0"}},
			{after: "e/3", want: []string{"e/4", "e/6", "e/8"}}, // After need not exist
			{after: "e/3", desc: true, want: []string{"e/2", "e/0"}},
			{after: "e/8", want: nil},
			{after: "e/0", desc: true, want: nil},
			{after: "e/0", limit: 2, want: []string{"e/2", "e/4"}, next: "e/4"},
			{after: "e/8", desc: true, limit: 2, want: []string{"e/6", "e/4"}, next: "e/4"},
			{after: "e/4", limit: 2, want: []string{"e/6", "e/8"}},
		}
		for _, tt := range tests {
			page, err := tbl.Query(ctx, store.Query{PK: pk, Prefix: "e/", After: tt.after, Limit: tt.limit, Desc: tt.desc})
			must(t, err)
			if got := sortKeys(page.Items); !slices.Equal(got, tt.want) || page.Next != tt.next {
				t.Errorf("Query(after %q, desc %v, limit %d) = %q next %q, want %q next %q",
					tt.after, tt.desc, tt.limit, got, page.Next, tt.want, tt.next)
			}
		}
	})

	t.Run("BatchGetKeepsKeyOrderAndLeavesOutMissing", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		var keys []store.Key
		for i := range 8 {
			k := store.Key{PK: fmt.Sprintf("%s/%d", pk, i%2), SK: fmt.Sprintf("n/%d", i)}
			if i%3 != 0 { // 0, 3, 6 stay missing
				must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(fmt.Sprint(i))}))
			}
			keys = append(keys, k)
		}
		rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		got, err := tbl.BatchGet(ctx, keys)
		must(t, err)
		var want []store.Key
		for _, k := range keys {
			if n := k.SK[len("n/"):]; n != "0" && n != "3" && n != "6" {
				want = append(want, k)
			}
		}
		if gk := itemKeys(got); !slices.Equal(gk, want) {
			t.Fatalf("BatchGet = %v, want %v (order of keys, missing left out)", gk, want)
		}
		for _, it := range got {
			if string(it.Body) != it.SK[len("n/"):] || it.Version != 1 {
				t.Fatalf("BatchGet item %v: body %q version %d", it.Key, it.Body, it.Version)
			}
		}
		if got, err := tbl.BatchGet(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("BatchGet(no keys) = %v, %v; want nothing, no error", got, err)
		}
	})

	t.Run("BatchGetOverOneHundredKeys", func(t *testing.T) {
		ctx, tbl, pk := testContext(t), newTable(t), partition(t)
		var keys, want []store.Key
		for i := range 150 {
			k := store.Key{PK: pk, SK: fmt.Sprintf("n/%03d", i)}
			if i%10 != 7 {
				must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(fmt.Sprint(i))}))
				want = append(want, k)
			}
			keys = append(keys, k)
		}
		slices.Reverse(keys)
		slices.Reverse(want)
		got, err := tbl.BatchGet(ctx, keys)
		must(t, err)
		if gk := itemKeys(got); !slices.Equal(gk, want) {
			t.Fatalf("BatchGet of 150 keys gave %d items (%v...), want %d in key order", len(gk), head(gk), len(want))
		}
	})
}

// sizedItem is an item whose Size is exactly size, with a JSON string body.
func sizedItem(k store.Key, size int) store.Item {
	it := store.Item{Key: k, Version: 1}
	pad := size - it.Size() - 2
	it.Body = []byte(`"` + strings.Repeat("x", pad) + `"`)
	return it
}

func sortKeys(items []store.Item) []string {
	var sks []string
	for _, it := range items {
		sks = append(sks, it.SK)
	}
	return sks
}

func itemKeys(items []store.Item) []store.Key {
	var ks []store.Key
	for _, it := range items {
		ks = append(ks, it.Key)
	}
	return ks
}

func head[T any](s []T) []T {
	return s[:min(len(s), 5)]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
