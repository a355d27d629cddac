package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
)

// BenchmarkBuild10kChat builds a 10,000-message chat whose every node needs
// the compactor, which takes 50 ms a call, through the queue and the
// worker; it reports wall time against the ideal of calls x 50 ms / 8.
func BenchmarkBuild10kChat(b *testing.B) {
	const total, callTime = 10_000, 50 * time.Millisecond
	for b.Loop() {
		table, log, queue := newMemTable(), newFakeLog(), storefake.NewQueue()
		comp := newScripted()
		comp.delay, comp.lineLen = callTime, 300 // two lines pass 512 bytes: every merge calls too
		m, err := New(Config{Table: table, Transcript: log, Queue: queue, Compactor: comp, Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go newConsumer(m, queue, nil).Worker(ctx, queue)
		start := time.Now()
		for i := 0; i < total; i++ {
			log.add("c", "user", long(i))
			if i%20 == 19 {
				if err := m.Appended(ctx, chatid.Chat{Tenant: "t", ID: "c"}, int64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		}
		var want int64 // the complete nodes of the chat
		for l := 0; 1<<l <= total; l++ {
			want += total >> l
		}
		for {
			st, _, err := m.states.get(ctx, chatid.Chat{Tenant: "t", ID: "c"})
			if err != nil {
				b.Fatal(err)
			}
			if st.Built == want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		wall := time.Since(start)
		cancel()
		calls := comp.total()
		ideal := time.Duration(calls) * callTime / MaxInFlight
		b.ReportMetric(float64(calls), "calls")
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(ideal.Seconds(), "ideal-s")
		b.ReportMetric(wall.Seconds()/ideal.Seconds(), "x-ideal")
	}
}

// grownChat is a chat of n entries, fully built, on in-memory stores; its
// entries are ~200 bytes, kept word for word, and their merges compacted.
func grownChat(tb testing.TB, n int, cache int) *fixture {
	f := newFixture(tb)
	f.comp.lineLen = 150
	m, err := New(Config{Table: f.table, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger(), CacheLines: cache})
	if err != nil {
		tb.Fatal(err)
	}
	f.m = m
	for i := 0; i < n; {
		for k := 0; k < 64 && i < n; k, i = k+1, i+1 {
			f.log.add(f.chat, "user", fmt.Sprintf("%d %s", i, strings.Repeat("r", 190)))
		}
		if err := f.m.Appended(context.Background(), f.ch(), int64(i)); err != nil {
			tb.Fatal(err)
		}
		f.deliverAll(tb)
	}
	return f
}

// renderEntries is the chat size BenchmarkRenderView100k reads.
var renderEntries = 100_000

// BenchmarkRenderView100k reads the view of a 100,000-message chat, and
// the same rows with plain batch gets, counting table calls per render.
func BenchmarkRenderView100k(b *testing.B) {
	f := grownChat(b, renderEntries, -1) // no line cache: count every read
	ctx := context.Background()
	st := f.state(b)
	var keys []store.Key
	for _, n := range st.View.nodes() {
		keys = append(keys, nodeKey(f.ch(), n))
	}
	b.Run("view", func(b *testing.B) {
		gets, batches, writes := f.table.gets.Load(), f.table.batches.Load(), f.table.writes.Load()
		var v wire.View
		for b.Loop() {
			var err error
			if v, err = f.m.ReadView(ctx, f.tenant, f.chat, false); err != nil {
				b.Fatal(err)
			}
		}
		n := float64(b.N)
		b.ReportMetric(float64(v.Lines), "lines")
		b.ReportMetric(float64(v.Bytes), "view-bytes")
		b.ReportMetric(float64(f.table.gets.Load()-gets)/n, "gets/render")
		b.ReportMetric(float64(f.table.batches.Load()-batches)/n, "batchgets/render")
		b.ReportMetric(float64(f.table.writes.Load()-writes)/n, "writes/render")
	})
	b.Run("batchget-only", func(b *testing.B) {
		for b.Loop() {
			for k := 0; k < len(keys); k += batchLimit {
				if _, err := f.table.BatchGet(ctx, keys[k:min(len(keys), k+batchLimit)]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	// The same reads with each row decoded: the least any render must do.
	b.Run("batchget-decode", func(b *testing.B) {
		for b.Loop() {
			for k := 0; k < len(keys); k += batchLimit {
				items, err := f.table.BatchGet(ctx, keys[k:min(len(keys), k+batchLimit)])
				if err != nil {
					b.Fatal(err)
				}
				for _, it := range items {
					var r nodeRow
					if err := json.Unmarshal(it.Body, &r); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// BenchmarkSchedulerEvent measures one event (an append and the builds it
// leads to) on chats of 1k, 10k and 100k entries, and the state item's
// size: both should stay flat as the chat grows.
func BenchmarkSchedulerEvent(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		f := grownChat(b, n, 0)
		// i outlives each run: with -count above 1 the fixture is reused,
		// and a run starting again at n would append entries already
		// scheduled, a no-op.
		i := n
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				f.log.add(f.chat, "user", fmt.Sprintf("%d %s", i, strings.Repeat("r", 190)))
				i++
				if err := f.m.Appended(ctx, f.ch(), int64(i)); err != nil {
					b.Fatal(err)
				}
				f.deliverAll(b)
			}
			b.ReportMetric(float64(f.table.stateBytes(f.ch())), "state-bytes")
			st := f.state(b)
			b.ReportMetric(float64(len(st.View.Runs)+len(st.Compact.Runs)), "runs")
		})
	}
}

// TestStateItemAfterABurst: 100,000 entries logged at once, before any is
// built, keep the state item small: the views are runs, not lists.
func TestStateItemStaysSmallAfterABurstOf100kEntries(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 100_000; i++ {
		f.log.add(f.chat, "user", "x")
	}
	if err := f.m.Appended(context.Background(), f.ch(), 100_000); err != nil {
		t.Fatal(err)
	}
	if size := f.table.stateBytes(f.ch()); size > 4<<10 {
		t.Errorf("state item after a burst of 100,000 entries: %d bytes", size)
	}
	v, err := f.m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Lines != 100_000 || v.Unbuilt != 100_000 || v.Bytes != f.state(t).View.Size {
		t.Errorf("view of the burst: %d lines, %d unbuilt, %d bytes (state %d)", v.Lines, v.Unbuilt, v.Bytes, f.state(t).View.Size)
	}
}
