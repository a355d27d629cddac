//go:build unix

package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	infrastack "github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/config"
)

// The end-to-end check of a deployed function's shape: the real restore
// `bootstrap` (built as sam build builds it, for this host) runs under the
// Lambda Runtime Interface Emulator, reads its configuration from the
// environment, builds its real S3 client and adapter against a local
// S3-protocol server (gofakes3 in this process, reached through
// AWS_ENDPOINT_URL_S3, and its table client against a local DynamoDB
// server), and answers API Gateway v2 events.

const rieBinary = "aws-lambda-rie"

func findRIE(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("..", ".tools", "bin", rieBinary)); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(rieBinary); err == nil {
		return p
	}
	msg := rieBinary + " is not installed: run `make tools`"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// ports are the emulators' loopback ports: from below the kernel's
// ephemeral range and held while in use (infrastack.Ports says why a port the
// kernel picked and closed again is not one to hand on).
var ports = infrastack.DefaultPorts()

// syncBuffer collects a child's output for the failure message.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startFunction runs program's bootstrap under the emulator with env and
// returns the invocation URL. The emulator is stopped when the test ends.
func startFunction(t *testing.T, program config.Program, env []string) (string, *syncBuffer) {
	t.Helper()
	rie := findRIE(t)
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bootstrap, "./functions/"+string(program))
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", program, err, out)
	}

	// An emulator that exits before it listens (one of its ports was
	// taken in the meantime) is started again on other ports.
	for attempt := 1; ; attempt++ {
		url, logs, exited := runEmulator(t, rie, dir, bootstrap, env)
		if !exited {
			return url, logs
		}
		if attempt == 3 {
			t.Fatalf("the emulator exited before it listened, %d times:\n%s", attempt, logs)
		}
		t.Logf("the emulator exited before it listened; starting it again:\n%s", logs)
	}
}

// runEmulator starts the emulator on bootstrap and waits until it listens,
// or reports that it exited first. It is stopped when the test ends.
func runEmulator(t *testing.T, rie, dir, bootstrap string, env []string) (url string, logs *syncBuffer, exited bool) {
	t.Helper()
	// Both of the emulator's addresses (its runtime API would otherwise
	// take 127.0.0.1:9001).
	invokeAddr, err := ports.Take()
	if err != nil {
		t.Fatal(err)
	}
	runtimeAddr, err := ports.Take()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		bootstrap)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	}, env...)
	logs = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, so that stopping it also stops the function
	// process it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the emulator: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		ports.Release(invokeAddr)
		ports.Release(runtimeAddr)
		if t.Failed() {
			t.Logf("emulator and function output:\n%s", logs)
		}
	})

	// The bound catches a hang; the emulator listens in well under a
	// second on an idle machine.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", invokeAddr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return "http://" + invokeAddr + "/2015-03-31/functions/function/invocations", logs, false
		}
		select {
		case <-done:
			return "", logs, true
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator did not listen on %s:\n%s", invokeAddr, logs)
		}
	}
}

func invokeHTTP(t *testing.T, url string, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoking: %v", err)
	}
	defer resp.Body.Close()
	var out events.APIGatewayV2HTTPResponse
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	// The emulator answers a function error with 200 too; an error payload
	// has no statusCode and fails below.
	if err := json.Unmarshal(raw.Bytes(), &out); err != nil || out.StatusCode == 0 {
		t.Fatalf("not an API Gateway response: %q (%v)", raw.String(), err)
	}
	return out
}

func healthEvent(requestID string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "GET /healthz",
		RawPath:  "/healthz",
		Headers:  map[string]string{"accept": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   "GET /healthz",
			AccountID:  "123456789012",
			Stage:      "$default",
			RequestID:  requestID,
			APIID:      "local",
			DomainName: "local.execute-api.us-east-1.amazonaws.com",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: "GET", Path: "/healthz", Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: "durachat-test",
			},
		},
	}
}

func TestRestoreBootstrapAnswersUnderTheRuntimeEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a bootstrap and runs the emulator: not in -short")
	}
	s3 := awstest.StartS3(t)
	bucket := s3.CreateBucket(t)
	// The table tells which images a chat names.
	ddb := awstest.StartDynamoDB(t)
	table := ddb.CreateTable(t)
	url, _ := startFunction(t, config.Restore, []string{
		"AWS_ENDPOINT_URL_S3=" + s3.URL,
		"AWS_ENDPOINT_URL_DYNAMODB=" + ddb.URL,
		config.EnvBucket + "=" + bucket,
		config.EnvTable + "=" + table,
		config.EnvLogLevel + "=debug",
		config.EnvTenantClaim + "=sub",
		config.EnvTokensSecret + "=",
	})

	resp := invokeHTTP(t, url, healthEvent("rie-healthy"))
	if resp.StatusCode != http.StatusOK || resp.Body != "{\"ok\":true}\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, resp.Body)
	}
	if resp.Headers["Content-Type"] != "application/json" || resp.Headers["X-Request-Id"] != "rie-healthy" {
		t.Errorf("headers %v", resp.Headers)
	}

	// S3 failing: the same function reports the outage as a 503, once the
	// healthy result it keeps for a few seconds has expired.
	time.Sleep(api.HealthCacheTTL)
	s3.Faults.Add(awstest.Method(http.MethodHead), -1, awstest.Answer{Status: http.StatusServiceUnavailable, ContentType: "application/xml",
		Body: []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)})
	resp = invokeHTTP(t, url, healthEvent("rie-outage"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" {
		t.Fatalf("healthz with S3 down: %d %v %q", resp.StatusCode, resp.Headers, resp.Body)
	}
	s3.Faults.Clear()

	// An unknown route is a JSON 404 from the same handler stack.
	ev := healthEvent("rie-unknown")
	ev.RawPath, ev.RequestContext.HTTP.Path = "/v1/nothing", "/v1/nothing"
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "tenant-1"}},
	}
	resp = invokeHTTP(t, url, ev)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route: %d %q", resp.StatusCode, resp.Body)
	}
}
