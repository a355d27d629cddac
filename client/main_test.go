package client_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/durachat/durachat/client/clienttest"
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
	srv, err := clienttest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	serverURL = srv.URL
	os.Setenv("DURACHAT_URL", serverURL)
	return m.Run()
}
