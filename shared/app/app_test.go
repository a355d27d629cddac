package app

import (
	"context"
	"errors"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

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
