package awstest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EndpointEnv names a running SQS-protocol server to use instead of
// starting one, e.g. http://127.0.0.1:9324.
const EndpointEnv = "DURACHAT_TEST_SQS_ENDPOINT"

// sqsStartTimeout bounds the wait for the Node server to listen.
const sqsStartTimeout = 20 * time.Second

// The SQS server is a child process shared by every test of one test
// binary; it is started at the first use and ends with the binary.
var shared struct {
	once     sync.Once
	endpoint string
	skip     string // why tests that need it are skipped
	err      error
	stdin    io.WriteCloser
}

// sqsServer returns the endpoint of the shared SQS server. When the
// server's Node modules are not installed it skips the test, or fails it
// when the environment variable CI is set: CI must run every test. Under
// -short it skips the test without starting the server.
func sqsServer(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("local SQS server: %s", shortSkip)
	}
	startShared()
	switch {
	case shared.err != nil:
		t.Fatalf("local SQS server: %v", shared.err)
	case shared.skip != "" && os.Getenv("CI") != "":
		t.Fatalf("local SQS server cannot start in CI: %s", shared.skip)
	case shared.skip != "":
		t.Skipf("local SQS server: %s", shared.skip)
	}
	return shared.endpoint
}

func startShared() {
	shared.once.Do(func() {
		if e := os.Getenv(EndpointEnv); e != "" {
			shared.endpoint = e
			return
		}
		shared.endpoint, shared.skip, shared.err = startSQS()
	})
}

// shortSkip is why tests that need the SQS server, a child process, do
// not run under -short.
const shortSkip = "not in -short"

// SQSMissing starts the shared SQS server if needed and tells why tests
// cannot have it outside CI ("" when they can, or when in CI, where
// StartSQS fails instead; under -short it tells so without starting it).
// Fixtures offering several backends use it to leave the AWS one out
// rather than skip a whole test.
func SQSMissing() string {
	if testing.Short() {
		return shortSkip
	}
	startShared()
	if shared.err != nil || os.Getenv("CI") != "" {
		return ""
	}
	return shared.skip
}

// startSQS runs infra/sqs/server.js on a free port. The child exits when
// this process does: its standard input is a pipe only we hold, and on
// Linux it also gets SIGKILL when we die (see parentDeathSignal).
func startSQS() (endpoint, skip string, err error) {
	dir, err := sqsDir()
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "local-aws-sqs")); err != nil {
		return "", "its Node modules are missing: run `npm ci` in infra/sqs (make test does)", nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "node is not installed", nil
	}
	cmd := exec.Command(node, "server.js", "0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SQS_EXIT_WITH_STDIN=1", "SQS_HOST=127.0.0.1")
	cmd.SysProcAttr = parentDeathSignal()
	stderr := &limitedWriter{left: 4096}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", err
	}
	if err := cmd.Start(); err != nil {
		return "", "", fmt.Errorf("start node: %w", err)
	}
	// The write end stays open, referenced from shared so it is never
	// finalized, for the life of the process; the kernel closes it when
	// we exit and the server then exits too.
	shared.stdin = stdin

	ports := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if port, ok := strings.CutPrefix(lines.Text(), "sqs listening on port "); ok {
				ports <- port
				break
			}
		}
		// Keep draining so the child never blocks on a full pipe.
		io.Copy(io.Discard, stdout)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	select {
	case port := <-ports:
		endpoint = "http://127.0.0.1:" + port
	case err := <-exited:
		return "", "", fmt.Errorf("node server.js exited before listening (%v): %s", err, stderr.String())
	case <-time.After(sqsStartTimeout):
		cmd.Process.Kill()
		return "", "", fmt.Errorf("node server.js did not listen within %s: %s", sqsStartTimeout, stderr.String())
	}
	if err := awaitAnswer(endpoint); err != nil {
		cmd.Process.Kill()
		return "", "", err
	}
	return endpoint, "", nil
}

// awaitAnswer waits until the server answers an HTTP request at all.
func awaitAnswer(endpoint string) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := client.Get(endpoint)
		if err == nil {
			res.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("SQS server at %s does not answer: %w", endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sqsDir finds infra/sqs from the module root above the working directory
// (go test runs each package in its own directory).
func sqsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "infra", "sqs"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// proxy forwards to a server at endpoint.
func proxy(endpoint string) http.Handler {
	target, err := url.Parse(endpoint)
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad SQS endpoint: "+err.Error(), http.StatusBadGateway)
		})
	}
	p := httputil.NewSingleHostReverseProxy(target)
	// Queue URLs name the proxied server's host; keep its view of itself.
	director := p.Director
	p.Director = func(r *http.Request) {
		director(r)
		r.Host = target.Host
	}
	return p
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
