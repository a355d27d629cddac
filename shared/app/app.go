// Package app holds what every durachat program shares in its wiring: the
// stores a program uses and the one http.Handler every HTTP program serves.
// The wiring of each kind of program is in a package of its own, so a
// program links only what it uses: lambdafn (any Lambda function and its
// S3 store), memoryapi (the transcript and summary memory) and local (the
// local server's embedded stores); the compactor is compactor.Open.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
)

// Stores are the backends of one program; a field is nil when the program
// does not use it (the hook functions have no Queue).
type Stores struct {
	Table    store.Table
	Blobs    store.Blobs
	Linker   store.Linker
	Queue    store.Queue
	Receiver store.Receiver
	// Uploader makes direct upload targets; Staging holds what hosts
	// uploaded until a ref claims it (S3's uploads/ prefix). The local
	// server checks uploads as they arrive and has no Staging.
	Uploader store.Uploader
	Staging  images.Staging
	// Scrubber clears what removed items leave in the store's file (the
	// embedded store; nil in AWS): a chat's deletion runs it before it
	// answers done.
	Scrubber interface {
		Scrub(ctx context.Context) error
	}
}

// Images is the image store over s: Blobs, with Staging for uploads.
func (s Stores) Images() *images.Store {
	return &images.Store{Blobs: s.Blobs, Staging: s.Staging}
}

// Ping checks that the table and the blob store answer. The queue is not
// pinged: SQS has no read that the functions' send-only permission allows.
func (s Stores) Ping(ctx context.Context) error {
	var errs []error
	if s.Table != nil {
		if _, err := s.Table.Get(ctx, store.HealthKey()); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("table: %w", err))
		}
	}
	if s.Blobs != nil {
		// S3 answers a HEAD of a missing object with 403 to a role that may
		// not list the bucket (least privilege): an answer all the same.
		// Only an outage counts.
		if _, err := s.Blobs.Head(ctx, store.HealthBlobKey()); store.IsOutage(err) {
			errs = append(errs, fmt.Errorf("blobs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Handler is the http.Handler of a program: routes behind authentication,
// public routes (signed links) and the health check over stores.
func Handler(logger *slog.Logger, auth api.Authenticator, stores Stores, routes []api.Routes, public ...api.Routes) (http.Handler, error) {
	return api.NewHandler(api.Options{
		Logger: logger,
		Auth:   auth,
		Health: api.CachePing(api.PingFunc(stores.Ping), api.HealthCacheTTL),
		Routes: routes,
		Public: public,
	})
}
