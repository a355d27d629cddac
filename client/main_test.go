package client_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests and examples talk to a real durachat server: `durachat serve`
// on embedded stores in a temporary directory, run as a user runs it. The
// client's module does not depend on the server's, so the binary is built
// from the repository this module sits in, or named by DURACHAT_SERVER.

// serverURL is the server every test and example talks to; the examples
// read it from DURACHAT_URL, as a host would.
var serverURL string

// serverProgram is the durachat binary startServer runs.
var serverProgram string

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
	if serverProgram, err = durachatBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		return 1
	}
	srv, err := startServer(filepath.Join(dir, "data"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		return 1
	}
	defer srv.Close()
	serverURL = srv.URL
	os.Setenv("DURACHAT_URL", serverURL)
	return m.Run()
}

// durachatBinary is DURACHAT_SERVER, else a build of ../cmd/durachat into
// dir.
func durachatBinary(dir string) (string, error) {
	if p := os.Getenv("DURACHAT_SERVER"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(filepath.Join("..", "cmd", "durachat")); err != nil {
		return "", errors.New("the tests need a durachat server: run them in the durachat repository (they build ../cmd/durachat), or set DURACHAT_SERVER to a durachat binary")
	}
	bin := filepath.Join(dir, "durachat")
	build := exec.Command("go", "build", "-o", bin, "./cmd/durachat")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the server (go build ./cmd/durachat): %w\n%s", err, out)
	}
	return bin, nil
}

// server is a running `durachat serve`.
type server struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL  string
	cmd  *exec.Cmd
	done chan error
}

// startServer runs the server on a free loopback port with its data in dir
// (kept there: start it again on the same dir to see a restart). env adds
// configuration variables; none of the test process's own DURACHAT_
// variables reach it.
func startServer(dir string, env map[string]string) (*server, error) {
	cmd := exec.Command(serverProgram, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DURACHAT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DURACHAT_ADDR=127.0.0.1:0", "DURACHAT_DATA="+dir)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", serverProgram, err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		// The log's first line that says it serves names the address;
		// the rest is read and dropped so the server never blocks on it.
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "durachat serving" {
				addr <- line.Addr
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.URL = "http://" + a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("the server ended before serving: %v", err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-s.done
		return nil, errors.New("the server did not serve within 60 s")
	}
}

// Close stops the server as Ctrl-C does and waits until it has closed its
// data directory (killing it after 30 s).
func (s *server) Close() error {
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		_ = s.cmd.Process.Kill()
	}
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("the server did not stop within 30 s: %v", <-s.done)
	}
}
