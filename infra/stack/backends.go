package stack

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Backend is one local server speaking an AWS protocol, reached through
// a proxy of the stack's own that can inject faults.
type Backend struct {
	Name   string
	URL    string // the proxy, which the functions use
	Faults *Faults
	srv    *http.Server
	stop   func()
}

// Close stops the proxy and the server.
func (b *Backend) Close() {
	if b.srv != nil {
		b.srv.Close()
	}
	if b.stop != nil {
		b.stop()
	}
}

// serveBackend serves h behind Faults on a free loopback port.
func serveBackend(name string, h http.Handler, stop func()) (*Backend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := &Faults{next: h}
	b := &Backend{Name: name, URL: "http://" + ln.Addr().String(), Faults: f, stop: stop,
		srv: &http.Server{Handler: f, ReadHeaderTimeout: 30 * time.Second}}
	go b.srv.Serve(ln)
	return b, nil
}

// StartS3 serves gofakes3 on memory, over plain HTTP (path-style
// addressing).
func StartS3() (*Backend, error) {
	return serveBackend("s3", gofakes3.New(s3mem.New()).Server(), nil)
}

// StartNodeServer runs one of infra's Node servers (infra/<dir>/server.js
// on a free port, printing "<ready> N" when it listens) behind a proxy.
// The server exits with this process: its standard input is a pipe that
// only this process holds.
func StartNodeServer(root, name, dir, ready, exitEnv string) (*Backend, error) {
	full := filepath.Join(root, "infra", dir)
	if _, err := os.Stat(filepath.Join(full, "node_modules")); err != nil {
		return nil, fmt.Errorf("%s: its Node modules are missing: run `make tools`", name)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%s: node is not installed: %w", name, err)
	}
	cmd := exec.Command(node, "server.js", "0")
	cmd.Dir = full
	cmd.Env = append(os.Environ(), exitEnv+"=1")
	cmd.SysProcAttr = childAttr()
	var stderr strings.Builder
	cmd.Stderr = &limited{w: &stderr, left: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting node: %w", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		stdin.Close()
		cmd.Process.Kill()
		<-exited
	}
	ports := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if port, ok := strings.CutPrefix(lines.Text(), ready+" "); ok {
				ports <- port
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var port string
	select {
	case port = <-ports:
	case <-exited:
		return nil, fmt.Errorf("%s: node %s/server.js exited before listening: %s", name, dir, stderr.String())
	case <-time.After(20 * time.Second):
		stop()
		return nil, fmt.Errorf("%s: node %s/server.js did not listen within 20 s: %s", name, dir, stderr.String())
	}
	target, _ := url.Parse("http://127.0.0.1:" + port)
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		director(r)
		// Queue URLs name the server's own host; keep its view of itself.
		r.Host = target.Host
	}
	b, err := serveBackend(name, proxy, stop)
	if err != nil {
		stop()
		return nil, err
	}
	return b, nil
}

// Faults answers chosen requests with an error answer instead of passing
// them on.
type Faults struct {
	next     http.Handler
	mu       sync.Mutex
	rule     func(*http.Request) (Answer, bool)
	Injected atomic.Int64
}

// Answer is an error answer in one of the AWS protocols.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// Set answers every request rule picks with its answer, until Clear.
func (f *Faults) Set(rule func(*http.Request) (Answer, bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule = rule
}

// Clear passes every request on again.
func (f *Faults) Clear() { f.Set(nil) }

func (f *Faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	rule := f.rule
	f.mu.Unlock()
	if rule != nil {
		if a, ok := rule(r); ok {
			f.Injected.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", a.ContentType)
			w.WriteHeader(a.Status)
			w.Write(a.Body)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// Always picks every request for answer.
func Always(a Answer) func(*http.Request) (Answer, bool) {
	return func(*http.Request) (Answer, bool) { return a, true }
}

// Sometimes picks a fraction of the requests whose X-Amz-Target names one
// of ops (every operation when ops is empty) for answer.
func Sometimes(fraction float64, a Answer, ops ...string) func(*http.Request) (Answer, bool) {
	return func(r *http.Request) (Answer, bool) {
		if len(ops) > 0 {
			_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
			found := false
			for _, o := range ops {
				found = found || o == op
			}
			if !found {
				return Answer{}, false
			}
		}
		return a, rand.Float64() < fraction
	}
}

// DynamoDBError is an error answer in DynamoDB's JSON protocol, e.g.
// (400, "ThrottlingException").
func DynamoDBError(status int, code, message string) Answer {
	body, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": message})
	return Answer{Status: status, ContentType: "application/x-amz-json-1.0", Body: body}
}

// S3Error is an error answer in S3's XML protocol, e.g. (503, "SlowDown").
func S3Error(status int, code, message string) Answer {
	body, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"Error"`
		Code    string
		Message string
	}{Code: code, Message: message})
	return Answer{Status: status, ContentType: "application/xml", Body: append([]byte(xml.Header), body...)}
}

// limited keeps the first bytes written to it.
type limited struct {
	mu   sync.Mutex
	w    io.Writer
	left int
}

func (l *limited) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left > 0 {
		n := min(len(p), l.left)
		l.w.Write(p[:n])
		l.left -= n
	}
	return len(p), nil
}
