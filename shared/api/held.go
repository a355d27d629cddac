package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Held bounds the memory that the requests of the routes sharing it hold
// at once for their bodies: a request waits for room for its body, times
// the copies of it its route holds, before its body is read, and gives
// the room back when it is answered. It is the backstop for routes whose
// bodies are held whole, and copied, for as long as they are served:
// their copies are bounded per request, this bounds the requests.
type Held struct {
	sem    *semaphore.Weighted
	size   int64
	wait   time.Duration
	copies int64
}

// NewHeld returns room for size bytes (at least MaxBody), each request
// waiting at most wait for its room, and holding its body once.
func NewHeld(size int64, wait time.Duration) *Held {
	size = max(size, MaxBody)
	return &Held{sem: semaphore.NewWeighted(size), size: size, wait: wait, copies: 1}
}

// Copies is the same room for requests that hold k copies of their body.
func (h *Held) Copies(k int64) *Held {
	c := *h
	c.copies = max(k, 1)
	return &c
}

// Hold waits for room for r's body (its Content-Length, or MaxBody when it
// declares none) times its copies, and returns the function that gives it
// back. A wait in vain is a 503 with Retry-After; a nil Held holds
// nothing.
func (h *Held) Hold(r *http.Request) (release func(), err error) {
	n := r.ContentLength
	if n < 0 {
		n = MaxBody
	}
	n = min(n, MaxBody) // a longer body is refused at MaxBody
	if h == nil || n == 0 {
		return func() {}, nil
	}
	n = min(n*h.copies, h.size) // one request is never refused for its size
	ctx, cancel := context.WithTimeout(r.Context(), h.wait)
	defer cancel()
	if err := h.sem.Acquire(ctx, n); err != nil {
		return nil, Unavailable(fmt.Errorf("%d bytes held by request bodies for %s: %w", h.size, h.wait, err))
	}
	return func() { h.sem.Release(n) }, nil
}

// Handler serves next once r's body has room (Hold).
func (h *Held) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := h.Hold(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
