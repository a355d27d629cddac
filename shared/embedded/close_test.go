package embedded

import (
	"errors"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

// TestCallsStartedOnceCloseBeginsAreRefused holds the DB in the moment
// after Close has woken the receivers and before bbolt has taken its lock:
// a call made then must fail as an outage and write nothing, just as it
// would once Close has returned.
func TestCallsStartedOnceCloseBeginsAreRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	close(db.closed) // Close's first step, without the second
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"QueueSend", func() error { return db.Queue("compact").Send(ctx, "x", 0) }},
		{"QueueReceive", func() error { _, err := db.Queue("compact").Receive(ctx, 1, 0, 0); return err }},
		{"TableCreate", func() error {
			return db.Table().Create(ctx, store.Item{Key: store.Key{PK: "p", SK: "s"}, Body: []byte("b")})
		}},
		{"BlobsPut", func() error {
			return db.Blobs().Put(ctx, "k", store.Blob{ContentType: "text/plain", Data: []byte("d")})
		}},
		{"Keys", func() error { _, err := db.Keys(); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, ErrClosed) {
				t.Fatalf("call after Close began = %v, want ErrUnavailable and ErrClosed", err)
			}
		})
	}
	if err := db.bolt.Close(); err != nil {
		t.Fatal(err)
	}

	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	keys, err := reopened.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("refused calls wrote %q", keys)
	}
}
