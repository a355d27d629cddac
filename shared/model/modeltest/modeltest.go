// Package modeltest holds what the local provider servers (anthropictest,
// bedrocktest, openaitest) share: the server, a record of the requests it
// received, the test's reply to each, and a way to drop a connection
// unanswered.
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
	count    int
	keep     int // 0: every request
}

// Keep makes the recorder hold only the latest n requests (n > 0) from
// now on, for a long run whose memory must stay bounded: Record still
// counts every request, Requests returns the latest n.
func (r *Recorder[R]) Keep(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep = max(n, 1)
	r.trim()
}

func (r *Recorder[R]) trim() {
	if r.keep > 0 && len(r.requests) > r.keep {
		r.requests = append(r.requests[:0], r.requests[len(r.requests)-r.keep:]...)
	}
}

// Record adds req and returns how many requests came before it.
func (r *Recorder[R]) Record(req R) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	r.trim()
	r.count++
	return r.count - 1
}

// Count is how many requests were recorded.
func (r *Recorder[R]) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Requests returns the requests kept: every one received so far, or the
// latest Keep.
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

// Server is a local provider server that records the requests it
// decodes and answers each as the test's reply says. A provider's server
// embeds it, and starts it with Listen.
type Server[Req, Rep any] struct {
	*httptest.Server
	Recorder[Req]
	reply func(n int, req Req) Rep
}

// Listen serves h on a local server that closes when the test ends;
// reply is what Answer asks.
func (s *Server[Req, Rep]) Listen(t testing.TB, reply func(n int, req Req) Rep, h http.HandlerFunc) {
	s.reply = reply
	s.Server = Start(t, h)
}

// Answer records req and returns how many requests came before it and
// the test's reply to it. The reply is asked before any byte of the
// answer is written, so it may block to hold one.
func (s *Server[Req, Rep]) Answer(req Req) (n int, rep Rep) {
	n = s.Record(req)
	return n, s.reply(n, req)
}

// Start serves h on a local server that closes when the test ends.
func Start(t testing.TB, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
