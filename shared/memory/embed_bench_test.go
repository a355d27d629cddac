package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// BenchmarkVectorSearch stores the vectors of chats of 10k entries (100k
// too with testenv.Long) on the embedded store, 512 dimensions (Titan V2
// as the stack asks it) and 1,024, and ranks them against random queries
// as search does (every vector of the chat read a page at a time, the
// cosine of each, the 100 nearest kept): it reports the p50 and p95 of a
// ranking and the bytes stored, and read, per entry.
func BenchmarkVectorSearch(b *testing.B) {
	sizes := []int{10_000}
	if testenv.Long() {
		sizes = append(sizes, 100_000)
	}
	for _, dims := range []int{512, 1024} {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("dims=%d/entries=%d", dims, size), func(b *testing.B) {
				benchVectors(b, dims, size)
			})
		}
	}
}

func benchVectors(b *testing.B, dims, size int) {
	be := testenv.Embedded(b)
	f := newFixture(b)
	m, err := New(Config{Table: be.Table, Transcript: f.log, Queue: f.queue, Logger: discardLogger(), Embedder: &synonyms{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, tag := f.ch(), modelTag((&synonyms{}).Name())
	r := rand.New(rand.NewPCG(1, 2))
	random := func() []float32 {
		v := make([]float32, dims)
		for k := range v {
			v[k] = float32(r.NormFloat64())
		}
		return v
	}
	bytes := 0
	for id := range size {
		it := store.Item{Key: vectorKey(c, int64(id)), Body: quantize(tag, random())}
		bytes += it.Size()
		if err := be.Table.Create(ctx, it); err != nil {
			b.Fatal(err)
		}
	}
	var took []time.Duration
	for b.Loop() {
		q := unit(random())
		t0 := time.Now()
		near, err := m.nearest(ctx, c, q, int64(size))
		if err != nil || len(near) != vectorHits {
			b.Fatalf("%d nearest: %v", len(near), err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(bytes)/float64(size), "B/entry")
	b.ReportMetric(float64(bytes)/float64(1<<20), "MiB-read/query")
}
