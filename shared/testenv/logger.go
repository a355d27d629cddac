package testenv

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// Logger is a logger for code under test that keeps its warnings and
// errors and prints them only if the test fails: the cause behind a 503,
// say. It never writes to t after the test ends, so goroutines that
// outlive the test may keep logging.
func Logger(t testing.TB) *slog.Logger {
	l := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			if s := l.String(); s != "" {
				t.Logf("what the code under test logged:\n%s", s)
			}
		}
	})
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
