package local

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lifecycle"
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

func TestLocalStoresKeepDataAcrossRestarts(t *testing.T) {
	cfg := config.Config{DataDir: t.TempDir(), PublicURL: "http://127.0.0.1:8080"}
	ctx := context.Background()
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	it := store.Item{Key: store.Key{PK: store.ChatPK("local", "c1"), SK: "meta"}, Body: []byte(`{"n":1}`)}
	if err := d.Stores.Table.Create(ctx, it); err != nil {
		t.Fatal(err)
	}
	if err := d.Stores.Queue.Send(ctx, `{"node":"x"}`, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Stores.Table.Get(ctx, it.Key)
	if err != nil || string(got.Body) != `{"n":1}` {
		t.Fatalf("after restart: %q, %v", got.Body, err)
	}
	ds, err := d.Stores.Receiver.Receive(ctx, 10, 30e9, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("queue after restart: %v, %v", ds, err)
	}
}

func TestLocalLinksServeTheBlobWithoutCredentials(t *testing.T) {
	ctx := context.Background()
	d, err := Open(config.Config{DataDir: t.TempDir(), PublicURL: "http://durachat.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := store.ImageKey("local", "0123456789abcdef")
	if err := d.Stores.Blobs.Put(ctx, key, store.Blob{ContentType: "image/png", Data: []byte("\x89PNG...")}); err != nil {
		t.Fatal(err)
	}
	// The chat the link is made through names the image.
	through := chatid.Chat{Tenant: "local", ID: "c"}
	if err := d.Stores.Table.Create(ctx, store.Item{Key: store.Key{PK: through.PK(), SK: store.ChatImageSK("0123456789abcdef")}, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	u, err := d.Stores.Linker.URL(ctx, key, through.LinkChat(), 60e9)
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Stores.Linker.URL(ctx, key, chatid.Chat{Tenant: "local", ID: "d"}.LinkChat(), 60e9)
	if err != nil {
		t.Fatal(err)
	}
	h, err := app.Handler(nil, Auth(config.Config{Tokens: map[string]string{"t": "x"}}), d.Stores, nil, d.LinkRoutes())
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
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", other, nil))
	if rec.Code != 404 {
		t.Fatalf("link through a chat that does not name the image: %d", rec.Code)
	}
}

// A request's work ends well before the sweep that follows a chat's
// deletion, so a request that found the chat live writes nothing into it
// after that sweep: each request's context ends requestTimeout after it
// starts.
func TestEveryRequestEndsWellBeforeTheSweepAfterADeletion(t *testing.T) {
	if 2*requestTimeout > lifecycle.SettleAfter {
		t.Fatalf("requests last up to %s, over half the delay of the sweep after a deletion (%s)", requestTimeout, lifecycle.SettleAfter)
	}
	var (
		deadline time.Time
		ok       bool
	)
	h := withDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, ok = r.Context().Deadline()
	}), requestTimeout)
	start := time.Now()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if !ok || deadline.Before(start) || deadline.After(time.Now().Add(requestTimeout)) {
		t.Fatalf("the request's deadline is %v (set %v), want %s after it started", deadline, ok, requestTimeout)
	}
}
