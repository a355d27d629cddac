// Package localtest runs a real durachat server in-process, as `durachat
// serve` runs it (embedded stores, the offline summarizer, no tokens), for
// the tests of hosts written in Go (examples/screenshot-agent).
package localtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/config"
)

// Server is a running local server.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL    string
	cancel context.CancelFunc
	served chan error
}

// Start serves the whole API on a free loopback port with its data in dir
// (kept there: start it again on the same dir to see a restart). env adds
// configuration variables (DURACHAT_SEARCH, DURACHAT_TOKENS...).
func Start(dir string, env map[string]string) (*Server, error) {
	vars := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: dir}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := config.Load(config.Serve, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cancel: cancel, served: make(chan error, 1)}
	addrs := make(chan net.Addr, 1)
	go func() { s.served <- local.Serve(ctx, cfg, cfg.Logger(io.Discard), func(a net.Addr) { addrs <- a }) }()
	select {
	case a := <-addrs:
		s.URL = "http://" + a.String()
		return s, nil
	case err := <-s.served:
		cancel()
		return nil, fmt.Errorf("localtest: the local server ended before listening: %w", err)
	case <-time.After(30 * time.Second):
		cancel()
		return nil, errors.New("localtest: the local server did not listen within 30 s")
	}
}

// Close stops the server and waits until its data directory is closed.
func (s *Server) Close() error {
	s.cancel()
	return <-s.served
}
