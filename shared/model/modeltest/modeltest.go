// Package modeltest holds what the local provider servers (anthropictest,
// bedrocktest, openaitest) share: a record of the requests they received,
// and a way to drop a connection unanswered.
package modeltest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Recorder keeps the requests a server received, in arrival order. Its
// zero value is ready; handlers may record concurrently.
type Recorder[R any] struct {
	mu       sync.Mutex
	requests []R
}

// Record adds req and returns how many requests came before it.
func (r *Recorder[R]) Record(req R) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	return len(r.requests) - 1
}

// Requests returns the requests received so far.
func (r *Recorder[R]) Requests() []R {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]R(nil), r.requests...)
}

// Hangup closes the connection under w without an answer, as a network
// failure would.
func Hangup(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
}

// Start serves h on a local server that closes when the test ends.
func Start(t testing.TB, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
