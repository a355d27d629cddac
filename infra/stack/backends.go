package stack

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// Backend is one local server speaking an AWS protocol, reached through
// a proxy of the stack's own that can inject faults (or directly, with
// no Faults: StartDirect).
type Backend struct {
	Name   string
	URL    string // what the functions use: the proxy, or the server
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
// addressing), behind awslocal.PresignedPuts: a host PUTs a direct upload
// straight to it, as it would to S3, and the size, checksum and expiry the
// offload function signed are enforced as S3 enforces them.
func StartS3() (*Backend, error) {
	creds := aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}
	return serveBackend("s3", awslocal.NewPresignedPuts(gofakes3.New(s3mem.New()).Server(), creds, Region), nil)
}

// StartNodeServer runs one of infra's Node servers (awslocal.SQS or
// awslocal.DynamoDB) behind a proxy. SQS long polls answer as soon as a
// message is there (awslocal.LongPoll), as SQS's do.
func StartNodeServer(root, dir string) (*Backend, error) {
	srv, err := awslocal.Start(root, dir)
	if err != nil {
		return nil, err
	}
	proxy, err := awslocal.NewProxy(srv.Endpoint)
	if err != nil {
		srv.Close()
		return nil, err
	}
	h := proxy
	if dir == awslocal.SQS {
		h = awslocal.NewLongPoll(proxy)
	}
	b, err := serveBackend(dir, h, srv.Close)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return b, nil
}

// StartDirect runs one of infra's Node servers with nothing in front of
// it: its Backend has no Faults.
func StartDirect(root, dir string) (*Backend, error) {
	srv, err := awslocal.Start(root, dir)
	if err != nil {
		return nil, err
	}
	return &Backend{Name: dir, URL: srv.Endpoint, stop: srv.Close}, nil
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
type Answer = awslocal.Answer

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
