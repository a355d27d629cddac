package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// source is a file to import, opened as often as it is read.
type source struct {
	open  func() (io.ReadCloser, error)
	size  int64
	close func()
}

// openSource opens the file name names; "-" is standard input, kept in a
// temporary file (deleted by close) since an import reads its file twice.
func openSource(name string) (*source, error) {
	if name != "-" {
		fi, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		return &source{open: func() (io.ReadCloser, error) { return os.Open(name) }, size: fi.Size(), close: func() {}}, nil
	}
	f, err := os.CreateTemp("", "durachat-import-*.jsonl")
	if err != nil {
		return nil, err
	}
	drop := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, os.Stdin)
	if err != nil {
		drop()
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return &source{open: func() (io.ReadCloser, error) { return os.Open(f.Name()) }, size: n, close: drop}, nil
}

// progress draws an import's progress on a terminal: one line, written
// again in place at most a few times a second. Nothing when w is not a
// terminal (a pipe, a file, a test's buffer).
type progress struct {
	w     io.Writer
	size  int64
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, size int64) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return &progress{}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &progress{}
	}
	return &progress{w: w, size: size, start: time.Now()}
}

func (p *progress) report(done int64) {
	if p.w == nil || time.Since(p.last) < 200*time.Millisecond && done < p.size {
		return
	}
	p.last = time.Now()
	pct := 100.0
	if p.size > 0 {
		pct = 100 * float64(done) / float64(p.size)
	}
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	fmt.Fprintf(p.w, "\rimporting: %5.1f%% (%.0f of %.0f MiB, %s)", pct, mb(done), mb(p.size), time.Since(p.start).Round(time.Second))
}

// done ends the progress line.
func (p *progress) done() {
	if p.w != nil && !p.last.IsZero() {
		fmt.Fprintln(p.w)
	}
}
