// Package awslocal starts the local servers under infra/ that speak AWS
// protocols and run on Node: infra/sqs (local-aws-sqs, SQS) and
// infra/dynalite (dynalite, DynamoDB). Each is a child process on a free
// loopback port that ends with the process that started it. The tests
// (shared/aws/awstest) and the local stack (infra/stack) both use it.
package awslocal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The servers, by their directory under infra/.
const (
	SQS      = "sqs"
	DynamoDB = "dynalite"
)

// ErrNotInstalled is returned when a server's Node modules or Node itself
// are missing (`make tools` installs the modules).
var ErrNotInstalled = errors.New("not installed")

// startTimeout bounds the wait for a server to listen.
const startTimeout = 20 * time.Second

// Server is a running local server.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	stdin    io.WriteCloser
	cmd      *exec.Cmd
	exited   chan struct{}
}

// Start runs infra/<dir>/server.js of the module at root on a free port
// and waits until it listens (it prints "... listening on port N"). The
// server exits when its standard input closes, which the kernel does when
// this process ends, however it ends; on Linux it also gets SIGKILL then.
func Start(root, dir string) (*Server, error) {
	full := filepath.Join(root, "infra", dir)
	if _, err := os.Stat(filepath.Join(full, "node_modules")); err != nil {
		return nil, fmt.Errorf("infra/%s: its Node modules are missing (run `make tools`): %w", dir, ErrNotInstalled)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node: %w", ErrNotInstalled)
	}
	cmd := exec.Command(node, "server.js", "0")
	cmd.Dir = full
	cmd.Env = append(os.Environ(), "SQS_EXIT_WITH_STDIN=1", "DYNAMODB_EXIT_WITH_STDIN=1")
	cmd.SysProcAttr = parentDeathSignal()
	stderr := &limitedWriter{left: 4096}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("infra/%s: starting node: %w", dir, err)
	}
	s := &Server{stdin: stdin, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	ports := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if _, port, ok := strings.Cut(lines.Text(), " listening on port "); ok {
				ports <- port
				break
			}
		}
		// Keep draining so the child never blocks on a full pipe.
		io.Copy(io.Discard, stdout)
	}()
	select {
	case port := <-ports:
		s.Endpoint = "http://127.0.0.1:" + port
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("infra/%s/server.js exited before listening: %s", dir, stderr.String())
	case <-time.After(startTimeout):
		s.Close()
		return nil, fmt.Errorf("infra/%s/server.js did not listen within %s: %s", dir, startTimeout, stderr.String())
	}
}

// Close stops the server.
func (s *Server) Close() {
	s.stdin.Close()
	s.cmd.Process.Kill()
	<-s.exited
}

// ModuleRoot finds the module root (the directory with go.mod) at or
// above the working directory; go test runs each package in its own.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// limitedWriter keeps the first bytes written to it and drops the rest.
type limitedWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left > 0 {
		n := min(len(p), l.left)
		l.buf.Write(p[:n])
		l.left -= n
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
