//go:build unix

package stack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/aws/awslocal"
)

// FaultRunsEnv turns on the fault runs (make stack-faults): each takes
// minutes, as the system's own recovery does (a killed build's claim
// lapses after its 3 minute lease).
const FaultRunsEnv = "DURACHAT_FAULT_RUNS"

// faultRun is one run: a workload of appends from concurrent writers to
// one chat, a fault injected while it runs, and the wait until the chat's
// tree is complete again.
type faultRun struct {
	name    string
	inject  func(s *stack.Stack) (clear func())
	hold    time.Duration // how long the fault stays
	writers int
	each    int
	// image, when set, makes every message name an image stored before
	// the fault, so that its leaf's build reads it from S3.
	image bool
}

// faultReport is what the docs record of a run.
type faultReport struct {
	accepted, logged, lost int64
	refused                int64 // answers the writers retried (503, 500)
	batchFailures          int64 // invocations of the compact function that failed as a whole
	itemRetries            int64 // messages the compact function asked back
	injected               int64 // requests answered by the fault
	converge               time.Duration
}

func TestFaultRunsOnTheDeployedShape(t *testing.T) {
	if os.Getenv(FaultRunsEnv) == "" {
		t.Skipf("set %s=1 (make stack-faults) to run the fault runs", FaultRunsEnv)
	}
	// A killed invocation's batch comes back after the queue's visibility:
	// 720 s in the template, 20 s here so that the run converges in minutes.
	s := startStack(t, stack.Options{Visibility: 20 * time.Second})
	compact := s.Functions["CompactFunction"]
	runs := []faultRun{
		{
			name: "TheCompactFunctionKilledMidBatchLosesNothing",
			inject: func(s *stack.Stack) func() {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case <-stop:
							return
						case <-time.After(2 * time.Second):
							if compact.Busy() > 0 {
								compact.Kill()
							}
						}
					}
				}()
				return func() { close(stop); <-done }
			},
			hold: 20 * time.Second, writers: 4, each: 50,
		},
		{
			name: "S3UnavailableFor30SecondsLosesNothing",
			inject: func(s *stack.Stack) func() {
				s.S3.Faults.Set(stack.Always(awslocal.S3Error(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")))
				return s.S3.Faults.Clear
			},
			hold: 30 * time.Second, writers: 4, each: 50, image: true,
		},
		{
			name: "DynamoDBThrottlingLosesNothing",
			inject: func(s *stack.Stack) func() {
				s.DynamoDB.Faults.Set(stack.Sometimes(0.3, awslocal.DynamoDBError(http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")))
				return s.DynamoDB.Faults.Clear
			},
			hold: 30 * time.Second, writers: 8, each: 25,
		},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			r := runFault(t, s, run)
			t.Logf("| %s | %d | %d | %d | %d | %d | %d | %d | %s |", run.name, r.injected, r.accepted, r.lost, r.refused,
				r.batchFailures, r.itemRetries, r.logged, r.converge.Round(time.Second))
			if r.lost != 0 {
				t.Fatalf("%d accepted messages are not in the log", r.lost)
			}
		})
	}
}

func runFault(t *testing.T, s *stack.Stack, run faultRun) faultReport {
	chat := strings.ToLower(run.name)
	if len(chat) > 100 {
		chat = chat[:100]
	}
	poller := s.Pollers[0]
	batchesBefore, itemsBefore := poller.Failed.Load(), poller.ItemFailures.Load()
	var rep faultReport
	var wg sync.WaitGroup
	host := api{t: t, base: s.URL, token: s.DevToken}
	var ref string
	if run.image {
		var after struct{ Stored []string }
		host.ok(http.MethodPost, "/v1/chats/"+chat+"/hooks/after-tool", map[string]any{
			"call":   map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []any{map[string]any{"type": "image", "data": pngBase64(t, 99), "mimeType": "image/png"}}},
		}, &after)
		ref = "[image " + after.Stored[0] + "]"
	}
	var accepted, refused, entries atomic.Int64
	errs := make(chan error, run.writers)
	for w := range run.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range run.each {
				text := fmt.Sprintf("writer %d message %d of %s: %s", w, i, run.name, strings.Repeat("fault ", 30))
				if ref != "" {
					text += " Compare with " + ref + "."
				}
				body, _ := json.Marshal(map[string]any{"receipt": fmt.Sprintf("w%d-%d", w, i),
					"messages": []any{map[string]any{"role": "user", "content": text}}})
				n, ids, err := appendUntil(s.URL+"/v1/chats/"+chat+"/messages", s.DevToken, body, time.Now().Add(3*time.Minute))
				entries.Add(int64(ids))
				refused.Add(int64(n))
				if err != nil {
					errs <- fmt.Errorf("writer %d message %d: %w", w, i, err)
					return
				}
				accepted.Add(1)
				// Paced to last through the fault.
				time.Sleep(run.hold / time.Duration(run.each))
			}
		}()
	}
	time.Sleep(2 * time.Second)
	for _, b := range []*stack.Backend{s.S3, s.DynamoDB, s.SQS} {
		b.Faults.Injected.Store(0)
	}
	clear := run.inject(s)
	time.Sleep(run.hold)
	clear()
	cleared := time.Now()
	for _, b := range []*stack.Backend{s.S3, s.DynamoDB, s.SQS} {
		rep.injected += b.Faults.Injected.Load()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rep.accepted, rep.refused = accepted.Load(), refused.Load()
	want := entries.Load()

	// Converged: every accepted message logged once, every node built.
	deadline := time.Now().Add(6 * time.Minute)
	for {
		var st struct {
			Entries int64 `json:"entries"`
			Unbuilt int64 `json:"unbuilt"`
			Stalled bool  `json:"stalled"`
		}
		host.ok(http.MethodGet, "/v1/chats/"+chat+"/status", nil, &st)
		rep.logged = st.Entries
		if st.Entries >= want && st.Unbuilt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged 6 minutes after the fault: %+v", st)
		}
		time.Sleep(time.Second)
	}
	rep.converge = time.Since(cleared)
	rep.lost = want - rep.logged
	if rep.lost < 0 {
		t.Errorf("the log holds %d entries, the accepted appends were given %d: some were logged twice", rep.logged, want)
	}
	rep.batchFailures = poller.Failed.Load() - batchesBefore
	rep.itemRetries = poller.ItemFailures.Load() - itemsBefore
	// The tree is complete: the view covers every entry.
	host.built(chat, rep.logged, time.Minute)
	return rep
}

// appendUntil posts an append until it is accepted or the deadline
// passes, retrying what a host retries (503 with Retry-After, 500 from the
// gateway, a failed connection); it returns how many answers it retried
// and how many entries the accepted append was given.
func appendUntil(url, token string, body []byte, deadline time.Time) (retried, entries int, err error) {
	for {
		status, raw, retryAfter, err := post(url, token, body)
		switch {
		case err == nil && status == http.StatusOK:
			var got struct{ IDs []int64 }
			if err := json.Unmarshal(raw, &got); err != nil {
				return retried, 0, fmt.Errorf("the answer %s: %w", raw, err)
			}
			return retried, len(got.IDs), nil
		case err == nil && status != http.StatusServiceUnavailable && status != http.StatusInternalServerError && status != http.StatusTooManyRequests:
			return retried, 0, fmt.Errorf("%d %s", status, raw)
		case time.Now().After(deadline):
			return retried, 0, fmt.Errorf("still refused at the deadline: %d %s %v", status, raw, err)
		}
		retried++
		time.Sleep(min(max(retryAfter, 200*time.Millisecond), 2*time.Second))
	}
}
