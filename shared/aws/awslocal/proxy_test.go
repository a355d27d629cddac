package awslocal_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// The proxy forwards a request only once its body has all arrived, so
// that nothing its own server does with the body once the answer starts
// can cut the answer short. The server here answers at once, before it
// reads the body, as a server may.
func TestProxyForwardsARequestOnlyWithItsWholeBody(t *testing.T) {
	answer := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	sentAll := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-sentAll:
		default:
			t.Error("the request was forwarded before its body had arrived")
		}
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
		if got, err := io.ReadAll(r.Body); err != nil || string(got) != `{"first":"half","second":"half"}` {
			t.Errorf("forwarded body = %q, %v", got, err)
		}
	}))
	t.Cleanup(upstream.Close)
	proxy, err := awslocal.NewProxy(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)

	body, send := io.Pipe()
	go func() {
		send.Write([]byte(`{"first":"half",`))
		time.Sleep(50 * time.Millisecond)
		close(sentAll)
		send.Write([]byte(`"second":"half"}`))
		send.Close()
	}()
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 32
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !bytes.Equal(got, answer) {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(answer), err)
	}
}

func TestProxyRefusesAnEndpointThatIsNotAServer(t *testing.T) {
	for _, endpoint := range []string{"", "127.0.0.1:8000", "://x"} {
		if _, err := awslocal.NewProxy(endpoint); err == nil {
			t.Errorf("NewProxy(%q) = nil error, want one", endpoint)
		}
	}
}
