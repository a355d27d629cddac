package testenv_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestEveryBackendIsComplete(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			k := store.Key{PK: store.ChatPK("tenant", "c1"), SK: "meta"}
			must(t, b.Table.Create(ctx, store.Item{Key: k, Body: []byte(`{}`)}))
			if _, err := b.Table.Get(ctx, k); err != nil {
				t.Fatalf("Get after Create: %v", err)
			}

			key := store.ImageKey("tenant", "0123456789abcdef")
			must(t, b.Blobs.Put(ctx, key, store.Blob{ContentType: "image/png", Data: []byte("png")}))
			// Linked through a chat that names the image.
			through := chatid.Chat{Tenant: "tenant", ID: "c1"}
			must(t, b.Table.Create(ctx, store.Item{Key: store.Key{PK: through.PK(), SK: store.ChatImageSK("0123456789abcdef")}, Body: []byte(`{}`)}))
			link, err := b.Linker.URL(ctx, key, through.LinkChat(), time.Minute)
			must(t, err)
			res, err := http.Get(link)
			must(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(body) != "png" {
				t.Fatalf("GET link: %d %q, want 200 and the blob", res.StatusCode, body)
			}

			must(t, b.Queue.Send(ctx, "job", 0))
			ds, err := b.Receiver.Receive(ctx, 10, time.Minute, 5*time.Second)
			must(t, err)
			if len(ds) != 1 || ds[0].Body != "job" {
				t.Fatalf("Receive = %+v, want the job", ds)
			}
			must(t, b.Receiver.Ack(ctx, ds[0].Receipt))
		})
	}
}

func TestAllHasBothBackendsInCI(t *testing.T) {
	names := map[string]bool{}
	for _, b := range testenv.All(t) {
		names[b.Name] = true
	}
	if !names["embedded"] {
		t.Fatalf("All gave %v, want the embedded backend", names)
	}
	if os.Getenv("CI") != "" && !names["aws"] {
		t.Fatalf("All gave %v in CI, want the aws backend too", names)
	}
}

func TestAWSGivesFreshStoresEachCall(t *testing.T) {
	a, b := testenv.AWS(t), testenv.AWS(t)
	ctx := t.Context()
	k := store.Key{PK: "p", SK: "s"}
	must(t, a.Table.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
	if _, err := b.Table.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second backend sees the first one's item: %v", err)
	}
	must(t, a.Queue.Send(ctx, "for a", 0))
	ds, err := b.Receiver.Receive(ctx, 10, time.Minute, time.Second)
	must(t, err)
	if len(ds) != 0 {
		t.Fatalf("second backend received the first one's message: %+v", ds)
	}
}

func TestFailingDecoratorsInjectOutagesOnChosenCalls(t *testing.T) {
	b := testenv.Embedded(t)
	ctx := t.Context()
	blobs := &testenv.FailingBlobs{Blobs: b.Blobs, FailPut: func(key string) error {
		if key == "bad" {
			return testenv.Outage(key)
		}
		return nil
	}}
	if err := blobs.Put(ctx, "bad", store.Blob{Data: []byte("x")}); !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, testenv.ErrInjected) {
		t.Fatalf("Put of the chosen key = %v, want an injected ErrUnavailable", err)
	}
	if _, err := b.Blobs.Get(ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed Put reached the store: Get = %v", err)
	}
	must(t, blobs.Put(ctx, "good", store.Blob{Data: []byte("x")}))
	if _, err := blobs.Get(ctx, "good"); err != nil {
		t.Fatalf("Get with no fault set = %v", err)
	}

	k := store.Key{PK: "p", SK: "s"}
	table := &testenv.FailingTable{Table: b.Table, FailCreate: testenv.Times(1, testenv.KeyOutage)}
	if err := table.Create(ctx, store.Item{Key: k, Body: []byte(`{}`)}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("first Create = %v, want the injected outage", err)
	}
	must(t, table.Create(ctx, store.Item{Key: k, Body: []byte(`{}`)}))
	table.FailQuery = func(store.Query) error { return store.Unavailable("query", testenv.ErrInjected) }
	if _, err := table.Query(ctx, store.Query{PK: "p"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Query = %v, want the injected outage", err)
	}

	queue := &testenv.FailingQueue{Queue: b.Queue, FailSend: testenv.Outage}
	if err := queue.Send(ctx, "x", 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Send = %v, want the injected outage", err)
	}
	receiver := &testenv.FailingReceiver{Receiver: b.Receiver, FailReceive: func() error { return store.Unavailable("receive", testenv.ErrInjected) }}
	if _, err := receiver.Receive(ctx, 1, time.Second, 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Receive = %v, want the injected outage", err)
	}
}

func TestTimesFailsOnlyTheFirstCalls(t *testing.T) {
	fail := testenv.Times(2, testenv.Outage)
	var got []bool
	for range 4 {
		got = append(got, fail("k") != nil)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("failures %v, want %v", got, want)
	}
}

// BenchmarkAWSSetup measures what AWS(t) costs a test: two in-process
// servers and a fresh table, bucket and queue.
func BenchmarkAWSSetup(b *testing.B) {
	testenv.AWS(b) // the shared SQS server starts once, outside the loop
	b.ResetTimer()
	for b.Loop() {
		testenv.AWS(b)
	}
}

// BenchmarkEmbeddedSetup measures what Embedded(t) costs a test.
func BenchmarkEmbeddedSetup(b *testing.B) {
	for b.Loop() {
		testenv.Embedded(b)
	}
}
