package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/api/openapitest"
	"github.com/durachat/durachat/shared/app/local/localtest"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/testenv"
)

// The attack stress test runs the local server as its own process, so its
// resident memory is its own, and attacks it the way a hostile tenant
// would: decompression bombs through every route that takes images, and
// before-request naming one image in every block of a 9 MiB request, from
// many clients at once. It reads the server's peak RSS (VmHWM) from /proc.
// The aims (docs/performance.md): one request at most 256 MB above the
// idle server, and at most 512 MB under any mix.

const (
	stressTokenA = "stress-token-tenant-a"
	stressTokenB = "stress-token-tenant-b"
	maxAboveIdle = 256 << 20
	maxPeak      = 512 << 20
)

type stressServer struct {
	url string
	pid int
}

// stressBinDir holds the server the stress tests build; TestMain removes it.
var stressBinDir string

func TestMain(m *testing.M) {
	v, err := openapitest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	checked = v
	code := openapitest.Suite(m, v)
	if stressBinDir != "" {
		os.RemoveAll(stressBinDir)
	}
	os.Exit(code)
}

// buildServer builds the server once for every stress test of the run.
var buildServer = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "durachat-stress-")
	if err != nil {
		return "", err
	}
	stressBinDir = dir
	bin := filepath.Join(dir, "durachat")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	return bin, build.Run()
})

func startStressServer(t *testing.T) *stressServer {
	t.Helper()
	bin, err := buildServer()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DURACHAT_DATA="+t.TempDir(),
		"DURACHAT_TOKENS="+stressTokenA+"=tenantA,"+stressTokenB+"=tenantB",
		"DURACHAT_LOG_LEVEL=error",
	)
	url := testenv.Serve(t, cmd)
	return &stressServer{url: url, pid: cmd.Process.Pid}
}

// memory reads the server's resident memory and its peak so far.
func (s *stressServer) memory(t *testing.T) (rss, peak int64) {
	return testenv.ResidentMemory(t, s.pid)
}

// resetPeak starts a new peak at the current RSS (Linux: writing 5 to
// clear_refs). It reports whether the kernel allows it.
func (s *stressServer) resetPeak() bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid), []byte("5"), 0) == nil
}

func (s *stressServer) post(token, route string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/chats/c1/"+route, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

func TestAttackStressPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: runs the server as a process and attacks it for a while")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the server's memory from /proc")
	}
	s := startStressServer(t)

	status, out, err := s.post(stressTokenA, "hooks/after-tool", imagestest.AfterTool(imagestest.BombPNG(64, 64)))
	if err != nil || status != http.StatusOK {
		t.Fatalf("storing an image: %d %v %s", status, err, out)
	}
	var stored struct{ Stored []string }
	if err := json.Unmarshal(out, &stored); err != nil || len(stored.Stored) != 1 {
		t.Fatalf("stored %s: %v", out, err)
	}
	attacks := imagestest.Attacks(stored.Stored[0], 9<<20)

	runtime.GC()
	time.Sleep(500 * time.Millisecond)
	idle, _ := s.memory(t)
	t.Logf("idle RSS %d MB", idle>>20)
	canReset := s.resetPeak()

	// One request at a time: each stays within 256 MB above idle.
	worstOne := int64(0)
	for _, a := range attacks {
		if canReset {
			s.resetPeak()
		}
		before, _ := s.memory(t)
		status, out, err := s.post(stressTokenA, a.Route, a.Body)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if !slices.Contains(a.Status, status) {
			t.Fatalf("%s: status %d, want one of %v: %.300s", a.Name, status, a.Status, out)
		}
		_, peak := s.memory(t)
		above := peak - idle
		t.Logf("%s: %d, peak RSS %d MB, %d MB above idle (RSS before %d MB)", a.Name, status, peak>>20, above>>20, before>>20)
		worstOne = max(worstOne, above)
		if canReset && above > maxAboveIdle {
			t.Errorf("%s: %d MB above idle, aim at most %d MB", a.Name, above>>20, maxAboveIdle>>20)
		}
	}

	// Every attack from several clients of both tenants at once, twice over.
	if canReset {
		s.resetPeak()
	}
	const clients = 8
	var wg sync.WaitGroup
	errs := make(chan error, clients*len(attacks)*2)
	for c := range clients {
		token := stressTokenA
		if c%2 == 1 {
			token = stressTokenB
		}
		wg.Go(func() {
			for round := range 2 {
				for i := range attacks {
					a := attacks[(i+c+round)%len(attacks)]
					status, out, err := s.post(token, a.Route, a.Body)
					switch {
					case err != nil:
						errs <- fmt.Errorf("%s: %w", a.Name, err)
					case !slices.Contains(a.Status, status) && !(status == http.StatusOK && a.Route == "hooks/before-request"):
						errs <- fmt.Errorf("%s: status %d: %.200s", a.Name, status, out)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, peak := s.memory(t)
	t.Logf("RESULT idle %d MB; worst single request %d MB above idle; %d clients x %d attacks x 2 rounds: peak RSS %d MB",
		idle>>20, worstOne>>20, clients, len(attacks), peak>>20)
	if peak > maxPeak {
		t.Errorf("peak RSS %d MB under concurrent attack, aim at most %d MB", peak>>20, maxPeak>>20)
	}
}

// An upload target's body is read whole and checked, so a hostile client
// sends the largest bodies it can from many connections at once: 32
// concurrent PUTs of 9.5 MiB images, each to a target of its own. The
// bodies held at once are bounded (embedded.UploadsHeld); a PUT that
// waits in vain is a 503 with Retry-After, and is retried as a client
// would.
func TestConcurrentUploadsPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: runs the server as a process and uploads 300 MiB to it")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the server's memory from /proc")
	}
	s := startStressServer(t)
	const uploads = 32
	type target struct {
		URL     string
		Headers map[string]string
	}
	targets := make([]target, uploads)
	var size int
	for i := range uploads {
		data := imagestest.NoisyPNG(uint64(i), 1824, 1820)
		size = len(data)
		d := client.Describe(data)
		body, _ := json.Marshal(d)
		status, out, err := s.post([]string{stressTokenA, stressTokenB}[i%2], "uploads", body)
		var a struct{ Upload *target }
		if err != nil || status != http.StatusOK || json.Unmarshal(out, &a) != nil || a.Upload == nil {
			t.Fatalf("upload target %d: %d %v %s", i, status, err, out)
		}
		targets[i] = *a.Upload
	}
	runtime.GC()
	time.Sleep(500 * time.Millisecond)
	idle, _ := s.memory(t)
	s.resetPeak()

	start := make(chan struct{})
	var wg sync.WaitGroup
	retried := make([]int, uploads)
	errs := make(chan error, uploads)
	for i := range uploads {
		wg.Go(func() {
			// Made again here so the test holds one body per PUT in flight.
			data := imagestest.NoisyPNG(uint64(i), 1824, 1820)
			<-start
			for {
				req, err := http.NewRequest(http.MethodPut, targets[i].URL, bytes.NewReader(data))
				if err != nil {
					errs <- err
					return
				}
				for k, v := range targets[i].Headers {
					if k != "Content-Length" {
						req.Header.Set(k, v)
					}
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- fmt.Errorf("PUT %d: %w", i, err)
					return
				}
				out, _ := io.ReadAll(res.Body)
				res.Body.Close()
				switch {
				case res.StatusCode == http.StatusOK:
					return
				case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" && retried[i] < 5:
					retried[i]++
					time.Sleep(time.Second) // sooner than it says: the test has no time to spare
				default:
					errs <- fmt.Errorf("PUT %d: %d %s", i, res.StatusCode, out)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, peak := s.memory(t)
	t.Logf("RESULT idle %d MB; %d concurrent PUTs of %d bytes (retried after a 503: %v): peak RSS %d MB",
		idle>>20, uploads, size, retried, peak>>20)
	if peak > maxPeak {
		t.Errorf("peak RSS %d MB under concurrent uploads, aim at most %d MB", peak>>20, maxPeak>>20)
	}
}

// The largest text appends a client can send, from six clients at once:
// 9 MiB of text each, through POST .../messages and through the MCP
// endpoint's log tool, each client to a chat of its own. An append's text
// is copied on its way to the log (decoded, recorded, listed in its
// entries, written); the copies held at once must leave the server within
// 512 MB. A 503 with Retry-After (the appends held are bounded) is
// retried, as a client would.
func TestConcurrentLargeTextAppendsPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: runs the server as a process and appends 108 MiB to it")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the server's memory from /proc")
	}
	const (
		clients = 6
		text    = 9 << 20
	)
	ctx := t.Context()
	for _, via := range []string{"http", "mcp"} {
		t.Run(via, func(t *testing.T) {
			s := startStressServer(t)
			mcpURL := s.url + "/v1/mcp"
			sessions := make([]string, clients)
			if via == "mcp" {
				for c := range sessions {
					var err error
					if sessions[c], err = localtest.MCPSession(ctx, mcpURL, stressTokenA); err != nil {
						t.Fatal(err)
					}
				}
			}
			runtime.GC()
			time.Sleep(500 * time.Millisecond)
			idle, _ := s.memory(t)
			s.resetPeak()
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			retried := make([]int, clients)
			for c := range clients {
				wg.Go(func() {
					chat := fmt.Sprintf("big-%d", c)
					url, session, body := s.url+"/v1/chats/"+chat+"/messages", "", localtest.TextAppend("r", text)
					if via == "mcp" {
						url, session, body = mcpURL, sessions[c], localtest.MCPLogCall(1, chat, "r", text)
					}
					status, out, n, err := localtest.PostRetrying(ctx, url, stressTokenA, session, body, 5)
					retried[c] = n
					if err == nil && (status != http.StatusOK || (via == "mcp" && !localtest.MCPLogged(out))) {
						err = fmt.Errorf("status %d: %.300s", status, out)
					}
					if err != nil {
						errs <- fmt.Errorf("client %d, %s: %w", c, chat, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			_, peak := s.memory(t)
			t.Logf("RESULT %s: idle %d MB; %d clients appending %d MiB of text at once (retried after a 503: %v): peak RSS %d MB", via, idle>>20, clients, text>>20, retried, peak>>20)
			if peak > maxPeak {
				t.Errorf("peak RSS %d MB under concurrent large appends (%s), aim at most %d MB", peak>>20, via, maxPeak>>20)
			}
		})
	}
}
