package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
)

// serverURL is the local server every test and example talks to: the one
// `durachat serve` runs, in-process, on embedded stores in a temporary
// directory. The examples read it from DURACHAT_URL, as a host would.
var serverURL string

func TestMain(m *testing.M) {
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "durachat-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: dir}
	cfg, err := config.Load(config.Serve, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- app.ServeLocal(ctx, cfg, cfg.Logger(io.Discard), func(a net.Addr) { addrs <- a }) }()
	defer func() {
		cancel()
		<-served
	}()
	select {
	case a := <-addrs:
		serverURL = "http://" + a.String()
	case err := <-served:
		fmt.Fprintln(os.Stderr, "local server:", err)
		return 1
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "local server did not listen within 30 s")
		return 1
	}
	os.Setenv("DURACHAT_URL", serverURL)
	return m.Run()
}
