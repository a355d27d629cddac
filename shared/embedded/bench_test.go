package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// Each write commits (and fsyncs) one bbolt transaction, so these measure
// the disk as much as the code.

func BenchmarkTableCreate(b *testing.B) {
	tbl := open(b, b.TempDir()).Table()
	body := []byte(`{"text":"` + fmt.Sprintf("%0512d", 0) + `"}`)
	i := 0
	for b.Loop() {
		if err := tbl.Create(b.Context(), store.Item{Key: store.Key{PK: "chat/t/c", SK: fmt.Sprintf("e/%09d", i)}, Body: body}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkTableGet(b *testing.B) {
	tbl := open(b, b.TempDir()).Table()
	k := store.Key{PK: "chat/t/c", SK: "state"}
	if err := tbl.Create(b.Context(), store.Item{Key: k, Body: make([]byte, 4<<10)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := tbl.Get(b.Context(), k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTableQueryPageOf100(b *testing.B) {
	tbl := open(b, b.TempDir()).Table()
	for i := range 1000 {
		if err := tbl.Create(b.Context(), store.Item{Key: store.Key{PK: "chat/t/c", SK: fmt.Sprintf("e/%09d", i)}, Body: make([]byte, 512)}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		p, err := tbl.Query(b.Context(), store.Query{PK: "chat/t/c", Prefix: "e/", After: "e/000000500", Limit: 100})
		if err != nil || len(p.Items) != 100 {
			b.Fatal(err, len(p.Items))
		}
	}
}

func BenchmarkQueueSendReceiveAck(b *testing.B) {
	q := open(b, b.TempDir()).Queue("compact")
	for b.Loop() {
		if err := q.Send(b.Context(), `{"chat":"c"}`, 0); err != nil {
			b.Fatal(err)
		}
		ds, err := q.Receive(b.Context(), 1, time.Minute, 0)
		if err != nil || len(ds) != 1 {
			b.Fatal(err, len(ds))
		}
		if err := q.Ack(b.Context(), ds[0].Receipt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBlobPutGet1MiB(b *testing.B) {
	blobs := open(b, b.TempDir()).Blobs()
	data := make([]byte, 1<<20)
	b.SetBytes(int64(len(data)))
	i := 0
	for b.Loop() {
		key := fmt.Sprintf("images/t/%d", i)
		if err := blobs.Put(b.Context(), key, store.Blob{ContentType: "image/jpeg", Data: data}); err != nil {
			b.Fatal(err)
		}
		if _, err := blobs.Get(b.Context(), key); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
