package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// eraseBenchEntries is the chat size BenchmarkEraseOneOf10k erases from.
const eraseBenchEntries = 10_000

// counting is a model that answers at once and counts its calls: the
// benchmark reports them, each standing for a second of a real model. Its
// lines are 300 bytes, as a summary's are, so two of them are too long
// to keep word for word and each merge is a call.
type counting struct{ calls atomic.Int64 }

func (c *counting) Compact(ctx context.Context, r memory.CompactRequest) (memory.Compacted, error) {
	c.calls.Add(1)
	line := r.Label + " " + strings.Repeat("summarized ", 30)
	return memory.Compacted{Line: line[:300], Attempts: 1, Model: "counting"}, nil
}

// BenchmarkEraseOneOf10k erases one message of a 10,000-message chat,
// fully built, on the embedded stores, and runs the erasure to its end
// (its queue task and the rebuilds of the lines taken back). It reports
// the model calls (each is a second of a 1 s model, and the rebuilds run
// one level after another), the table calls, and the seconds the stores
// took: the erasure's time with a 1 s model is model-s plus store-s.
//
//	go test ./shared/lifecycle -run '^$' -bench EraseOneOf10k -benchtime 1x -timeout 30m
func BenchmarkEraseOneOf10k(b *testing.B) {
	be := testenv.Embedded(b)
	raw := be.Table // read by the waits, uncounted
	var calls atomic.Int64
	count := func(store.Key) error { calls.Add(1); return nil }
	be.Table = &testenv.FailingTable{Table: be.Table, FailCreate: count, FailUpdate: count, FailDelete: count, FailGet: count,
		FailQuery: func(store.Query) error { calls.Add(1); return nil }, FailBatchGet: func([]store.Key) error { calls.Add(1); return nil }}
	imgs := images.New(be.Blobs)
	core := lifecycle.New(lifecycle.Config{Table: be.Table, Blobs: be.Blobs, Images: imgs, Queue: be.Queue})
	tl := transcript.New(transcript.Config{Table: be.Table, Blobs: be.Blobs, Images: imgs, Chats: core})
	model := &counting{}
	m, err := memory.New(memory.Config{Table: be.Table, Transcript: tl, Images: imgs, Queue: be.Queue, Chats: core,
		Logger: testenv.Logger(b), Compactor: model, Descriptions: imgs})
	if err != nil {
		b.Fatal(err)
	}
	routes := lifecycle.NewRoutes(core, tl, m)
	// watcher is another process, over the uncounted table, that tells
	// when the rebuilds are done.
	watcher, err := memory.New(memory.Config{Table: raw, Transcript: transcript.New(transcript.Config{Table: raw, Blobs: be.Blobs, Images: imgs}),
		Images: imgs, Queue: be.Queue, Logger: testenv.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	consumer := tasks.NewConsumer(tasks.Config{Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{
		tasks.Build: m.BuildTask, tasks.Delete: core.DeletionTask, tasks.Settle: core.SettleTask, tasks.Expire: core.SweepTask,
		tasks.Erase: routes.EraseTask,
	}), Queue: be.Queue, Visibility: m.ClaimLease(), Retrier: be.Receiver, Logger: testenv.Logger(b)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = consumer.Worker(ctx, be.Receiver) }()

	var seqs []int64
	for i := 0; i < eraseBenchEntries; i += 100 {
		var msgs []pi.Message
		for k := range 100 {
			text := fmt.Sprintf("message %d %s", i+k, strings.Repeat("words to summarize ", 30))
			msgs = append(msgs, pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(text)}}})
		}
		ch, ids, err := tl.AppendChat(ctx, "t", "c", msgs, fmt.Sprint("r", i))
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Appended(ctx, ch, ids[len(ids)-1]+1); err != nil {
			b.Fatal(err)
		}
		seqs = append(seqs, ids...)
	}
	built := func() bool {
		s, err := m.Status(ctx, "t", "c")
		if err != nil {
			b.Fatal(err)
		}
		return s.Unbuilt == 0 && s.Entries == eraseBenchEntries
	}
	for !built() {
		time.Sleep(100 * time.Millisecond)
	}
	b.ResetTimer()
	var modelCalls, tableCalls, nodes int64
	for i := range b.N {
		before, beforeModel := calls.Load(), model.calls.Load()
		e, err := routes.Erase(ctx, "t", "c", lifecycle.EraseRequest{Seqs: []int64{seqs[(i*7919+4321)%len(seqs)]}})
		if err != nil {
			b.Fatal(err)
		}
		for !e.Done {
			for {
				s, err := watcher.Status(ctx, "t", "c")
				if err != nil {
					b.Fatal(err)
				}
				if s.Unbuilt == 0 && s.InFlight == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if e, err = routes.ErasureOf(ctx, "t", "c", e.Erasure); err != nil {
				b.Fatal(err)
			}
		}
		nodes += int64(len(e.Nodes))
		modelCalls += model.calls.Load() - beforeModel
		tableCalls += calls.Load() - before
	}
	n := float64(b.N)
	b.ReportMetric(float64(nodes)/n, "lines-rebuilt/op")
	b.ReportMetric(float64(modelCalls)/n, "model-calls/op")
	b.ReportMetric(float64(modelCalls)/n, "model-s/op")
	b.ReportMetric(float64(tableCalls)/n, "table-calls/op")
	b.ReportMetric(b.Elapsed().Seconds()/n, "store-s/op")
}
