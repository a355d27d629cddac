package awstest

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// EndpointEnv names a running SQS-protocol server to use instead of
// starting one, e.g. http://127.0.0.1:9324.
const EndpointEnv = "DURACHAT_TEST_SQS_ENDPOINT"

// The SQS server is a child process shared by every test of one test
// binary; it is started at the first use and ends with the binary.
var shared struct {
	once     sync.Once
	endpoint string
	skip     string // why tests that need it are skipped
	err      error
	server   *awslocal.Server
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

// startSQS runs infra/sqs/server.js on a free port (see awslocal.Start).
func startSQS() (endpoint, skip string, err error) {
	return startLocal(awslocal.SQS, &shared.server)
}

// startLocal starts one of infra's Node servers, kept in *keep for the
// life of the process, and waits until it answers.
func startLocal(dir string, keep **awslocal.Server) (endpoint, skip string, err error) {
	root, err := awslocal.ModuleRoot()
	if err != nil {
		return "", "", err
	}
	srv, err := awslocal.Start(root, dir)
	if errors.Is(err, awslocal.ErrNotInstalled) {
		return "", err.Error(), nil
	}
	if err != nil {
		return "", "", err
	}
	// Referenced for the life of the process, so that its standard input
	// is never closed before we exit.
	*keep = srv
	if err := awaitAnswer(srv.Endpoint); err != nil {
		srv.Close()
		return "", "", err
	}
	return srv.Endpoint, "", nil
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
			return fmt.Errorf("server at %s does not answer: %w", endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxy forwards to a server at endpoint.
func proxy(endpoint string) http.Handler {
	h, err := awslocal.NewProxy(endpoint)
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		})
	}
	return h
}
