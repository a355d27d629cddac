package testenv

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// announcement is the line `durachat serve` prints once it listens,
// followed by its URL.
const announcement = "durachat serving on "

// Serve starts cmd, a `durachat serve` whose environment it gives
// DURACHAT_ADDR=127.0.0.1:0, and returns the URL the server announces:
// the port is the one the server itself was given, never one picked by
// closing a listener, which another program could take before the server
// listens. The server is stopped as Ctrl-C stops it when t ends.
func Serve(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "DURACHAT_ADDR=127.0.0.1:0")
	stderr := &lockedBuffer{}
	if cmd.Stderr == nil {
		cmd.Stderr = stderr
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), announcement); ok {
				url <- u
				break
			}
		}
		close(url)
		// Keep reading, so the server never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u, ok := <-url:
		if !ok {
			cmd.Wait()
			t.Fatalf("the server ended before it served: %s\n%.4000s", cmd.ProcessState, stderr)
		}
		return u
	case <-time.After(2 * time.Minute): // a hang, not a pace
		t.Fatalf("the server did not serve within 2 minutes:\n%.4000s", stderr)
	}
	return ""
}
