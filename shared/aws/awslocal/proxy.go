package awslocal

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// maxProxiedBody bounds a request body the proxy holds: DynamoDB's largest
// request is 16 MB, SQS's 1 MB.
const maxProxiedBody = 16 << 20

// NewProxy forwards every request to the server at endpoint, keeping the
// server's own host in the Host header: queue URLs name it.
//
// It reads a request's whole body before forwarding it. Forwarded as a
// stream, the body is still open when the answer begins, and net/http
// closes it as soon as the answer's header is written; the transport,
// which reads the body once more past its declared length to see it end,
// then fails and closes the connection the answer is still arriving on,
// so a large answer reaches the client cut short (golang/go#40747).
func NewProxy(endpoint string) (http.Handler, error) {
	target, err := url.Parse(endpoint)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("proxy to %q: not a server URL (%v)", endpoint, err)
	}
	// Every function's environment reaches the server through here at
	// once: with the default transport's 2 idle connections, all but two
	// of them would open a new connection to it for each request.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 0, 256
	rp := &httputil.ReverseProxy{Transport: transport, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxProxiedBody+1))
		switch {
		case err != nil:
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		case len(body) > maxProxiedBody:
			http.Error(w, "request body over 16 MB", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	}), nil
}
