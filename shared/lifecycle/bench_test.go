package lifecycle_test

import (
	"context"
	"fmt"
	"image/color"
	"sync/atomic"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// BenchmarkAppendTracked is the cost of the lifecycle's bookkeeping on an
// append (the chat's state, and the references of the image it names)
// against the same append without it, on the embedded stores. Each append
// is one user message naming one stored image. tenantReads/op counts the
// reads of the partition every chat of the tenant shares (chats/...).
//
//	go test ./shared/lifecycle -run '^$' -bench AppendTracked -benchtime 2000x
func BenchmarkAppendTracked(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		name := "untracked"
		if tracked {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			be := testenv.Embedded(b)
			var writes, reads atomic.Int64
			count := func(n *atomic.Int64) func(store.Key) error {
				return func(store.Key) error { n.Add(1); return nil }
			}
			var shared tenantKeyCount
			be.Table = &testenv.FailingTable{Table: shared.wrap(be.Table), FailCreate: count(&writes), FailUpdate: count(&writes), FailDelete: count(&writes),
				FailGet: count(&reads), FailQuery: func(store.Query) error { reads.Add(1); return nil }, FailBatchGet: func([]store.Key) error { reads.Add(1); return nil }}
			imgs := images.New(be.Blobs)
			cfg := transcript.Config{Table: be.Table, Blobs: be.Blobs, Images: imgs}
			if tracked {
				cfg.Chats = lifecycle.New(lifecycle.Config{Table: be.Table, Blobs: be.Blobs})
			}
			tl := transcript.New(cfg)
			ctx := context.Background()
			shot := pngB64(b, color.RGBA{1, 1, 1, 255})
			p, err := images.Shrink(ctx, shot)
			if err != nil {
				b.Fatal(err)
			}
			if err := imgs.PutPrepared(ctx, "t", p); err != nil {
				b.Fatal(err)
			}
			if _, err := be.Blobs.Head(ctx, store.ImageKey("t", p.Name)); err != nil {
				b.Fatal(err)
			}
			writes.Store(0)
			reads.Store(0)
			shared.reads.Store(0)
			b.ResetTimer()
			for i := range b.N {
				msg := pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(fmt.Sprint("turn ", i)), pi.TextBlock(refs.Ref(p.Name))}}}
				if _, err := tl.Append(ctx, "t", "c", []pi.Message{msg}, fmt.Sprint("r", i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
			b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
			b.ReportMetric(float64(shared.reads.Load())/float64(b.N), "tenantReads/op")
		})
	}
}
