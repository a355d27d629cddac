package app

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/store"
)

func TestCheckListenAllowsOpenAddressesOnlyWithTokens(t *testing.T) {
	tests := []struct {
		addr   string
		tokens bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.3.4.5:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"[::]:8080", false, false},
		{"192.0.2.10:8080", false, false},
		{"example.internal:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{":8080", true, true},
	}
	for _, tt := range tests {
		err := CheckListen(tt.addr, tt.tokens)
		var open *ErrOpenListen
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s tokens=%v: %v", tt.addr, tt.tokens, err)
		case !tt.ok && !errors.As(err, &open):
			t.Errorf("%s tokens=%v: err = %v, want ErrOpenListen", tt.addr, tt.tokens, err)
		}
	}
	if err := CheckListen("nonsense", false); err == nil {
		t.Error("an address without a port passed")
	}
}

type pingTable struct {
	store.Table
	err error
}

func (p pingTable) Get(context.Context, store.Key) (store.Item, error) { return store.Item{}, p.err }

type pingBlobs struct {
	store.Blobs
	err error
}

func (p pingBlobs) Head(context.Context, string) (store.BlobInfo, error) {
	return store.BlobInfo{}, p.err
}

func TestPingIsHealthyWhenTheStoresAnswer(t *testing.T) {
	denied := errors.New("s3: AccessDenied (403)")
	down := store.Unavailable("get", errors.New("connection refused"))
	tests := []struct {
		name    string
		stores  Stores
		healthy bool
	}{
		{"no stores", Stores{}, true},
		{"missing health item", Stores{Table: pingTable{err: store.ErrNotFound}, Blobs: pingBlobs{err: store.ErrNotFound}}, true},
		{"blob HEAD denied is an answer", Stores{Blobs: pingBlobs{err: denied}}, true},
		{"table down", Stores{Table: pingTable{err: down}, Blobs: pingBlobs{}}, false},
		{"table refuses", Stores{Table: pingTable{err: errors.New("AccessDeniedException")}}, false},
		{"blobs down", Stores{Table: pingTable{}, Blobs: pingBlobs{err: down}}, false},
		{"blobs time out", Stores{Blobs: pingBlobs{err: context.DeadlineExceeded}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.stores.Ping(context.Background()); (err == nil) != tt.healthy {
				t.Fatalf("Ping = %v, want healthy %v", err, tt.healthy)
			}
		})
	}
}

func TestLocalStoresKeepDataAcrossRestarts(t *testing.T) {
	cfg := config.Config{DataDir: t.TempDir(), PublicURL: "http://127.0.0.1:8080"}
	ctx := context.Background()
	l, err := OpenLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	it := store.Item{Key: store.Key{PK: store.ChatPK("local", "c1"), SK: "meta"}, Body: []byte(`{"n":1}`)}
	if err := l.Stores.Table.Create(ctx, it); err != nil {
		t.Fatal(err)
	}
	if err := l.Stores.Queue.Send(ctx, `{"node":"x"}`, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = OpenLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Stores.Table.Get(ctx, it.Key)
	if err != nil || string(got.Body) != `{"n":1}` {
		t.Fatalf("after restart: %q, %v", got.Body, err)
	}
	ds, err := l.Stores.Receiver.Receive(ctx, 10, 30e9, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("queue after restart: %v, %v", ds, err)
	}
}

func TestLocalLinksServeTheBlobWithoutCredentials(t *testing.T) {
	ctx := context.Background()
	l, err := OpenLocal(config.Config{DataDir: t.TempDir(), PublicURL: "http://durachat.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := store.ImageKey("local", "0123456789abcdef")
	if err := l.Stores.Blobs.Put(ctx, key, store.Blob{ContentType: "image/png", Data: []byte("\x89PNG...")}); err != nil {
		t.Fatal(err)
	}
	u, err := l.Stores.Linker.URL(ctx, key, 60e9)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(nil, LocalAuth(config.Config{Tokens: map[string]string{"t": "x"}}), l.Stores, nil, l.LinkRoutes())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", u, nil))
	if rec.Code != 200 || rec.Body.String() != "\x89PNG..." || rec.Header().Get("Content-Type") != "image/png" {
		t.Fatalf("link: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", u+"0", nil))
	if rec.Code != 403 {
		t.Fatalf("tampered link: %d", rec.Code)
	}
}
