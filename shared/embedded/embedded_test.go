package embedded_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storetest"
)

func open(t testing.TB, dir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTableConformance(t *testing.T) {
	storetest.TestTable(t, func(t *testing.T) store.Table { return open(t, t.TempDir()).Table() })
}

func TestBlobsConformance(t *testing.T) {
	storetest.TestBlobs(t, func(t *testing.T) store.Blobs { return open(t, t.TempDir()).Blobs() })
}

func TestQueueConformance(t *testing.T) {
	storetest.TestQueue(t, func(t *testing.T) (store.Queue, store.Receiver) {
		q := open(t, t.TempDir()).Queue("compact")
		return q, q
	})
}

func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	db, err := embedded.Open(dir)
	must(t, err)
	k := store.Key{PK: "chat/t/c", SK: "state"}
	must(t, db.Table().Create(ctx, store.Item{Key: k, Body: []byte(`{"n":1}`)}))
	must(t, db.Table().Update(ctx, store.Item{Key: k, Version: 2, Body: []byte(`{"n":2}`)}))
	must(t, db.Blobs().Put(ctx, "images/t/abc", store.Blob{ContentType: "image/png", Data: []byte("png bytes")}))
	q := db.Queue("compact")
	must(t, q.Send(ctx, "delayed", time.Second))
	must(t, q.Send(ctx, "in flight", 0))
	ds, err := q.Receive(ctx, 10, time.Second, 0)
	must(t, err)
	if len(ds) != 1 || ds[0].Body != "in flight" {
		t.Fatalf("before restart received %+v, want the undelayed message", ds)
	}
	must(t, db.Close())

	db = open(t, dir)
	it, err := db.Table().Get(ctx, k)
	must(t, err)
	if it.Version != 2 || string(it.Body) != `{"n":2}` {
		t.Fatalf("after restart: version %d body %q, want the update", it.Version, it.Body)
	}
	b, err := db.Blobs().Get(ctx, "images/t/abc")
	must(t, err)
	if b.ContentType != "image/png" || string(b.Data) != "png bytes" {
		t.Fatalf("after restart: blob %q %q", b.ContentType, b.Data)
	}
	got := map[string]int{}
	q = db.Queue("compact")
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		ds, err := q.Receive(ctx, 10, time.Minute, 5*time.Second)
		must(t, err)
		for _, d := range ds {
			got[d.Body] = d.Receives
			must(t, q.Ack(ctx, d.Receipt))
		}
	}
	if got["delayed"] != 1 || got["in flight"] != 2 {
		t.Fatalf("after restart received %v (body: receives), want the delayed message once and the unacked one a second time", got)
	}
}

func TestSecondOpenFailsWithErrLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, dir)
	db, err := embedded.Open(dir)
	if err == nil {
		_ = db.Close()
		t.Fatal("a second Open of one directory succeeded")
	}
	if !errors.Is(err, embedded.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
}

func TestExpiredItemIsAbsent(t *testing.T) {
	ctx := t.Context()
	db := open(t, t.TempDir())
	tbl := db.Table()
	past, future := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
	gone := store.Key{PK: "p", SK: "e/1"}
	live := store.Key{PK: "p", SK: "e/2"}
	must(t, tbl.Create(ctx, store.Item{Key: gone, Body: []byte(`"old"`), Expires: past}))
	must(t, tbl.Create(ctx, store.Item{Key: live, Body: []byte(`"live"`), Expires: future}))

	if _, err := tbl.Get(ctx, gone); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an expired item = %v, want ErrNotFound", err)
	}
	page, err := tbl.Query(ctx, store.Query{PK: "p"})
	must(t, err)
	if len(page.Items) != 1 || page.Items[0].Key != live {
		t.Errorf("Query = %+v, want only the live item", page.Items)
	}
	items, err := tbl.BatchGet(ctx, []store.Key{gone, live})
	must(t, err)
	if len(items) != 1 || items[0].Key != live {
		t.Errorf("BatchGet = %+v, want only the live item", items)
	}
	if err := tbl.Update(ctx, store.Item{Key: gone, Version: 2, Body: []byte(`"x"`)}); !errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("Update of an expired item = %v, want ErrConditionFailed", err)
	}

	n, err := db.PurgeExpired(ctx)
	must(t, err)
	if n != 1 {
		t.Errorf("PurgeExpired = %d, want 1", n)
	}
	must(t, tbl.Create(ctx, store.Item{Key: gone, Body: []byte(`"new"`)}))
	it, err := tbl.Get(ctx, gone)
	must(t, err)
	if it.Version != 1 || string(it.Body) != `"new"` {
		t.Errorf("re-created item: %+v", it)
	}
}

func TestCreateReplacesExpiredItem(t *testing.T) {
	ctx := t.Context()
	tbl := open(t, t.TempDir()).Table()
	k := store.Key{PK: "p", SK: "lease"}
	must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"old"`), Expires: time.Now().Add(-time.Minute).Unix()}))
	must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`"new"`)}))
	it, err := tbl.Get(ctx, k)
	must(t, err)
	if it.Version != 1 || string(it.Body) != `"new"` || it.Expires != 0 {
		t.Fatalf("Get = %+v, want the new item", it)
	}
}

func TestQueryPageStopsNearOneMegabyte(t *testing.T) {
	ctx := t.Context()
	tbl := open(t, t.TempDir()).Table()
	body := []byte(`"` + strings.Repeat("x", 300<<10) + `"`)
	for _, sk := range []string{"a", "b", "c", "d", "e"} {
		must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: "p", SK: sk}, Body: body}))
	}
	page, err := tbl.Query(ctx, store.Query{PK: "p"})
	must(t, err)
	if len(page.Items) != 4 || page.Next != "d" {
		t.Fatalf("unlimited query: %d items, next %q; want 4 (past 1 MB) and next \"d\"", len(page.Items), page.Next)
	}
	page, err = tbl.Query(ctx, store.Query{PK: "p", After: page.Next})
	must(t, err)
	if len(page.Items) != 1 || page.Items[0].SK != "e" || page.Next != "" {
		t.Fatalf("second page: %d items, next %q; want just \"e\"", len(page.Items), page.Next)
	}
}

func TestBatchGetGivesRepeatedKeyTwice(t *testing.T) {
	ctx := t.Context()
	tbl := open(t, t.TempDir()).Table()
	k := store.Key{PK: "p", SK: "n/1"}
	must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
	items, err := tbl.BatchGet(ctx, []store.Key{k, {PK: "p", SK: "n/2"}, k})
	must(t, err)
	if len(items) != 2 || items[0].Key != k || items[1].Key != k {
		t.Fatalf("BatchGet = %+v, want the item twice", items)
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	ctx := t.Context()
	db := open(t, t.TempDir())
	tbl := db.Table()
	tests := []struct {
		name string
		key  store.Key
	}{
		{"EmptyPartition", store.Key{SK: "s"}},
		{"EmptySortKey", store.Key{PK: "p"}},
		{"NULInPartition", store.Key{PK: "p\x00q", SK: "s"}},
		{"PartitionOver2048Bytes", store.Key{PK: strings.Repeat("p", 2049), SK: "s"}},
		{"SortKeyOver1024Bytes", store.Key{PK: "p", SK: strings.Repeat("s", 1025)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tbl.Create(ctx, store.Item{Key: tt.key, Body: []byte(`{}`)}); !errors.Is(err, embedded.ErrInvalidKey) {
				t.Errorf("Create = %v, want ErrInvalidKey", err)
			}
			if _, err := tbl.Get(ctx, tt.key); !errors.Is(err, embedded.ErrInvalidKey) {
				t.Errorf("Get = %v, want ErrInvalidKey", err)
			}
			if _, err := tbl.BatchGet(ctx, []store.Key{tt.key}); !errors.Is(err, embedded.ErrInvalidKey) {
				t.Errorf("BatchGet = %v, want ErrInvalidKey", err)
			}
		})
	}
	for _, key := range []string{"", strings.Repeat("k", 1025), "bad\xffutf8"} {
		if err := db.Blobs().Put(ctx, key, store.Blob{Data: []byte("x")}); !errors.Is(err, embedded.ErrInvalidKey) {
			t.Errorf("Blobs.Put(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestOversizeBlobIsRefused(t *testing.T) {
	ctx := t.Context()
	blobs := open(t, t.TempDir()).Blobs()
	err := blobs.Put(ctx, "k", store.Blob{Data: make([]byte, embedded.MaxBlobSize+1)})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Put over MaxBlobSize = %v, want ErrTooLarge", err)
	}
	if _, err := blobs.Head(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a refused put, Head = %v, want ErrNotFound", err)
	}
}

func TestStaleReceiptCannotAckRedelivery(t *testing.T) {
	ctx := t.Context()
	q := open(t, t.TempDir()).Queue("compact")
	must(t, q.Send(ctx, "job", 0))
	first, err := q.Receive(ctx, 1, 0, 0) // visibility 0: receivable again at once
	must(t, err)
	second, err := q.Receive(ctx, 1, time.Minute, 0)
	must(t, err)
	if len(first) != 1 || len(second) != 1 || second[0].ID != first[0].ID {
		t.Fatalf("deliveries %+v then %+v, want one message twice", first, second)
	}
	if err := q.Ack(ctx, first[0].Receipt); !errors.Is(err, embedded.ErrStaleReceipt) {
		t.Fatalf("Ack with the first delivery's receipt = %v, want ErrStaleReceipt", err)
	}
	if err := q.Retry(ctx, first[0].Receipt, 0); !errors.Is(err, embedded.ErrStaleReceipt) {
		t.Fatalf("Retry with the first delivery's receipt = %v, want ErrStaleReceipt", err)
	}
	must(t, q.Ack(ctx, second[0].Receipt))
	if err := q.Ack(ctx, second[0].Receipt); !errors.Is(err, embedded.ErrStaleReceipt) {
		t.Fatalf("second Ack = %v, want ErrStaleReceipt", err)
	}
	for _, receipt := range []string{"", "not hex", strings.Repeat("ab", 31)} {
		if err := q.Ack(ctx, receipt); !errors.Is(err, embedded.ErrStaleReceipt) {
			t.Fatalf("Ack(%q) = %v, want ErrStaleReceipt", receipt, err)
		}
	}
}

func TestReceiveWakesOnSend(t *testing.T) {
	// The receiver's context ends long before its wait would: only the
	// wake-up from Send can make it return the message.
	ctx, cancel := context.WithTimeout(t.Context(), embedded.MaxWait/2)
	defer cancel()
	q := open(t, t.TempDir()).Queue("compact")
	type result struct {
		ds  []store.Delivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := q.Receive(ctx, 10, time.Minute, embedded.MaxWait)
		done <- result{ds, err}
	}()
	time.Sleep(50 * time.Millisecond) // let the receiver start waiting
	must(t, q.Send(ctx, "wake up", 0))
	r := <-done
	must(t, r.err)
	if len(r.ds) != 1 || r.ds[0].Body != "wake up" {
		t.Fatalf("waiting Receive returned %+v, want the message sent while it waited", r.ds)
	}
}

func TestReceiveEndsWithContextAndClose(t *testing.T) {
	db := open(t, t.TempDir())
	q := db.Queue("compact")
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := q.Receive(ctx, 1, time.Second, embedded.MaxWait); !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive after cancel = %v, want context.Canceled", err)
	}
	go func() { time.Sleep(20 * time.Millisecond); _ = db.Close() }()
	if _, err := q.Receive(t.Context(), 1, time.Second, embedded.MaxWait); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("Receive across Close = %v, want ErrClosed", err)
	}
	if err := q.Send(t.Context(), "x", 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Send after Close = %v, want ErrUnavailable", err)
	}
}

func TestQueueArgumentsOutsideSQSLimitsAreRefused(t *testing.T) {
	ctx := t.Context()
	db := open(t, t.TempDir())
	q := db.Queue("compact")
	tests := []struct {
		name string
		call func() error
	}{
		{"SendNegativeDelay", func() error { return q.Send(ctx, "x", -time.Second) }},
		{"SendDelayOver15Minutes", func() error { return q.Send(ctx, "x", embedded.MaxDelay+time.Second) }},
		{"ReceiveMaxZero", func() error { _, err := q.Receive(ctx, 0, time.Second, 0); return err }},
		{"ReceiveMaxOver10", func() error { _, err := q.Receive(ctx, 11, time.Second, 0); return err }},
		{"ReceiveNegativeVisibility", func() error { _, err := q.Receive(ctx, 1, -time.Second, 0); return err }},
		{"ReceiveWaitOver20Seconds", func() error { _, err := q.Receive(ctx, 1, time.Second, 21*time.Second); return err }},
		{"RetryDelayOver12Hours", func() error { return q.Retry(ctx, "r", embedded.MaxVisibility+time.Second) }},
		{"QueueNameWithSlash", func() error { return db.Queue("a/b").Send(ctx, "x", 0) }},
		{"EmptyQueueName", func() error { return db.Queue("").Send(ctx, "x", 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	err := q.Send(ctx, strings.Repeat("x", embedded.MaxMessageSize+1), 0)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Send over MaxMessageSize = %v, want ErrTooLarge", err)
	}
	ds, err := q.Receive(ctx, 10, time.Second, 0)
	must(t, err)
	if len(ds) != 0 {
		t.Fatalf("refused sends left messages: %+v", ds)
	}
}

func TestQueuesAreSeparate(t *testing.T) {
	ctx := t.Context()
	db := open(t, t.TempDir())
	must(t, db.Queue("a").Send(ctx, "for a", 0))
	ds, err := db.Queue("b").Receive(ctx, 10, time.Second, 0)
	must(t, err)
	if len(ds) != 0 {
		t.Fatalf("queue b received %+v sent to a", ds)
	}
	ds, err = db.Queue("a").Receive(ctx, 10, time.Second, 0)
	must(t, err)
	if len(ds) != 1 || ds[0].Body != "for a" {
		t.Fatalf("queue a received %+v", ds)
	}
}

func TestCreateAllWritesEveryItemOrNone(t *testing.T) {
	ctx := context.Background()
	tbl := open(t, t.TempDir()).Table().(*embedded.Table)
	items := []store.Item{{Key: store.Key{PK: "p", SK: "a"}, Body: []byte("1")}, {Key: store.Key{PK: "p", SK: "b"}, Body: []byte("2")}}
	must(t, tbl.CreateAll(ctx, items))
	for _, want := range items {
		got, err := tbl.Get(ctx, want.Key)
		if err != nil || got.Version != 1 || string(got.Body) != string(want.Body) {
			t.Fatalf("Get %v = %+v %v", want.Key, got, err)
		}
	}
	again := []store.Item{{Key: store.Key{PK: "p", SK: "c"}, Body: []byte("3")}, {Key: store.Key{PK: "p", SK: "a"}, Body: []byte("x")}}
	if err := tbl.CreateAll(ctx, again); !errors.Is(err, store.ErrConditionFailed) || !strings.Contains(err.Error(), "p/a") {
		t.Fatalf("CreateAll over a taken key = %v, want a condition failure naming it", err)
	}
	if _, err := tbl.Get(ctx, again[0].Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused CreateAll wrote %v: %v", again[0].Key, err)
	}
	if err := tbl.CreateAll(ctx, []store.Item{{Key: store.Key{PK: "", SK: "x"}}}); err == nil {
		t.Fatal("CreateAll took an invalid key")
	}
}
