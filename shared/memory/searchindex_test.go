package memory

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// TestSearchIndexOnRealStores runs the index through every backend's table:
// segments sealed by prefix queries and conditional creates, ranked hits
// across segments and the tail, an erasure rewriting its segment, and every
// index item in the incarnation's partition, which the chat's deletion
// sweeps.
func TestSearchIndexOnRealStores(t *testing.T) {
	if testing.Short() {
		t.Skip("real stores: not in -short")
	}
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			f := newFixture(t)
			m, err := New(Config{Table: b.Table, Transcript: f.log, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger(), Search: true})
			if err != nil {
				t.Fatal(err)
			}
			f.m = m
			n := int64(2*segEntries + 10)
			for i := range n {
				text := fmt.Sprintf("entry %d of the log", i)
				switch i {
				case 3, segEntries + 4, n - 2:
					text = "we sailed to Zanzibar in a dhow"
				}
				f.log.add(f.chat, "user", text)
			}
			if err := m.Appended(t.Context(), f.ch(), n); err != nil {
				t.Fatal(err)
			}
			text := searchText(t, f, wire.SearchArgs{Text: "sailing to zanzibar"})
			for _, id := range []int64{3, segEntries + 4, n - 2} {
				if !strings.Contains(text, fmt.Sprintf("id %d ", id)) {
					t.Fatalf("hit %d missing:\n%s", id, text)
				}
			}
			segs, err := m.markers(t.Context(), f.ch())
			if err != nil || indexedTo(segs) != 2*segEntries {
				t.Fatalf("index reaches %d, want %d: %v", indexedTo(segs), 2*segEntries, err)
			}
			f.log.mu.Lock()
			e := &f.log.entries[f.chat][segEntries+4]
			e.Erased = f.clock.Now()
			e.Text = transcript.ErasedText(e.Erased)
			f.log.mu.Unlock()
			if _, err := m.Erased(t.Context(), f.ch(), []int64{segEntries + 4}); err != nil {
				t.Fatal(err)
			}
			if text := searchText(t, f, wire.SearchArgs{Text: "zanzibar"}); strings.Contains(text, fmt.Sprintf("id %d ", segEntries+4)) || !strings.Contains(text, "id 3 ") {
				t.Fatalf("after the erasure:\n%s", text)
			}
			page, err := b.Table.Query(t.Context(), store.Query{PK: f.ch().PK(), Prefix: store.SearchPrefix})
			if err != nil || len(page.Items) == 0 {
				t.Fatalf("no index item in the incarnation's partition: %v", err)
			}
		})
	}
}

// benchText is a message of words drawn Zipf-like from a vocabulary, as a
// conversation's are.
func benchText(r *rand.Rand, z *rand.Zipf) string {
	n := 8 + r.IntN(30)
	w := make([]string, n)
	for k := range w {
		w[k] = fmt.Sprintf("w%d", z.Uint64())
	}
	return strings.Join(w, " ")
}

// BenchmarkSearch logs chats of 1k and 10k entries of 8 to 38 words (a
// 20,000-word vocabulary, Zipf-distributed) on the embedded store, seals
// their index and runs queries of 3 to 6 words: it reports the query p50
// and p99, the index's bytes per entry and the time and items written per
// logged entry.
func BenchmarkSearch(b *testing.B) {
	sizes := []int{1_000, 10_000}
	if testenv.Long() {
		sizes = append(sizes, 100_000)
	}
	for _, size := range sizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			be := testenv.Embedded(b)
			f := newFixture(b)
			counting := &countingTable{Table: be.Table}
			m, err := New(Config{Table: counting, Transcript: f.log, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger(), Search: true})
			if err != nil {
				b.Fatal(err)
			}
			f.m = m
			r := rand.New(rand.NewPCG(1, 2))
			z := rand.NewZipf(r, 1.1, 2, 20_000)
			for range size {
				f.log.add(f.chat, "user", benchText(r, z))
			}
			ctx := context.Background()
			if err := m.Appended(ctx, f.ch(), int64(size)); err != nil {
				b.Fatal(err)
			}
			counting.writes = 0
			start := time.Now()
			for {
				segs, err := m.sealSearch(ctx, f.ch())
				if err != nil {
					b.Fatal(err)
				}
				if int64(size)-indexedTo(segs) < segEntries {
					break
				}
			}
			sealed := time.Since(start)
			var bytes, items int
			q := store.Query{PK: f.ch().PK(), Prefix: store.SearchPrefix}
			for {
				page, err := be.Table.Query(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				for _, it := range page.Items {
					bytes += it.Size()
					items++
				}
				if page.Next == "" {
					break
				}
				q.After = page.Next
			}
			var took []time.Duration
			for b.Loop() {
				words := make([]string, 3+r.IntN(4))
				for k := range words {
					words[k] = fmt.Sprintf("w%d", z.Uint64())
				}
				t0 := time.Now()
				if _, err := m.Search(ctx, f.tenant, f.chat, wire.SearchArgs{Text: strings.Join(words, " ")}); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(bytes)/float64(size), "index-B/entry")
			b.ReportMetric(float64(counting.writes)/float64(size), "writes/entry")
			b.ReportMetric(float64(sealed.Microseconds())/float64(size), "seal-us/entry")
			b.ReportMetric(float64(items)/float64(size), "items/entry")
		})
	}
}

// countingTable counts the writes through it.
type countingTable struct {
	store.Table
	writes int
}

func (c *countingTable) Create(ctx context.Context, it store.Item) error {
	c.writes++
	return c.Table.Create(ctx, it)
}

func (c *countingTable) Update(ctx context.Context, it store.Item) error {
	c.writes++
	return c.Table.Update(ctx, it)
}

// TestAnEntryRanksByItsNeighboursToo checks the neighbour rule: an entry
// scores its own BM25 plus neighbourShare of its better neighbour's, so an
// answer beside its question's words is found, and a phrase search (every
// term required) lists only the entries holding them.
func TestAnEntryRanksByItsNeighboursToo(t *testing.T) {
	// Entries holding "boat" once, all of the same length: each scores
	// one unit by its own words.
	boat := func(ids ...int64) corpus {
		cp := corpus{post: map[string][]posting{}, docs: 20, length: 20 * 4}
		for _, id := range ids {
			cp.post["boat"] = append(cp.post["boat"], posting{id, 1, 4})
		}
		return cp
	}
	const h = neighbourShare
	for _, tc := range []struct {
		name   string
		hits   []int64
		all    bool
		before int64
		want   map[int64]float64 // id: score in units
	}{
		{"the entries on either side of a hit are found at a share of its score", []int64{5}, false, 20,
			map[int64]float64{5: 1, 4: h, 6: h}},
		{"hits side by side rank above a lone one", []int64{2, 3, 9}, false, 20,
			map[int64]float64{2: 1 + h, 3: 1 + h, 1: h, 4: h, 9: 1, 8: h, 10: h}},
		{"no neighbour before the first entry or from before on", []int64{0, 7}, false, 8,
			map[int64]float64{0: 1, 1: h, 7: 1, 6: h}},
		{"every term required: only the entries holding them", []int64{5, 6}, true, 20,
			map[int64]float64{5: 1, 6: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := boat(tc.hits...)
			idf := math.Log(1 + (20-float64(len(tc.hits))+0.5)/(float64(len(tc.hits))+0.5))
			got := map[int64]float64{}
			for _, r := range cp.score([]string{"boat"}, tc.all, tc.before) {
				got[r.id] = math.Round(r.score/idf*1000) / 1000
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("scores in units of a lone hit: got %v, want %v", got, tc.want)
			}
		})
	}
}
