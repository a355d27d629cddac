//go:build unix

package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/model/openai/openaitest"
	"github.com/durachat/durachat/shared/testenv"
)

// TurnRunsEnv turns on the turn runs (make stack-turns): measurements of
// the deployed shape against the local server that take minutes, with
// their figures in docs/stack.md. They time and report; the only failures
// are wrong answers.
const TurnRunsEnv = "DURACHAT_TURN_RUNS"

func turnRuns(t *testing.T) {
	t.Helper()
	if os.Getenv(TurnRunsEnv) == "" {
		t.Skipf("set %v=1 (make stack-turns) to run the turn runs", TurnRunsEnv)
	}
}

// turnSteps are the requests of one host turn, in order.
var turnSteps = []string{"append", "view?wait=turn", "before-request (6 refs)", "after-tool (2 images)", "append (tool call and result)"}

// hostTurns plays a host's turns on one chat of one server: each turn
// logs the user's message, waits for the view, restores a request naming
// the 6 images of the last turns, offloads a tool result of 2 new images
// and logs the call and its result.
type hostTurns struct {
	host api
	chat string
	refs []string // the latest images stored, newest last
	// took[step] are the steps' durations, one per turn; turn[i] the
	// whole turns'.
	took [][]time.Duration
	turn []time.Duration
}

func newHostTurns(host api, chat string) *hostTurns {
	h := &hostTurns{host: host, chat: chat, took: make([][]time.Duration, len(turnSteps))}
	// Six images to restore from the first turn on.
	for i := range 3 {
		h.offload(uint64(1000 + i))
	}
	return h
}

// offload stores 2 images of seed through after-tool and returns the
// tool result's content as the host logs it.
func (h *hostTurns) offload(seed uint64) []json.RawMessage {
	var after struct {
		Result struct {
			Content []json.RawMessage `json:"content"`
		} `json:"result"`
		Stored []string `json:"stored"`
	}
	h.host.ok(http.MethodPost, "/v1/chats/"+h.chat+"/hooks/after-tool", json.RawMessage(imagestest.AfterTool(
		imagestest.NoisyPNG(seed, 256, 256), imagestest.NoisyPNG(seed+1<<32, 256, 256))), &after)
	if len(after.Stored) != 2 {
		h.host.t.Fatalf("after-tool stored %v, want 2 images", after.Stored)
	}
	h.refs = append(h.refs, after.Stored...)
	if len(h.refs) > 6 {
		h.refs = h.refs[len(h.refs)-6:]
	}
	return after.Result.Content
}

// play runs turn i and records its steps' times.
func (h *hostTurns) play(i int) {
	t := h.host.t
	path := "/v1/chats/" + h.chat
	// A user message over 512 bytes, so that its leaf is built (through
	// the queue and the compact function on the stack) and the view waits.
	user := fmt.Sprintf("turn %d: %v", i, strings.Repeat("please look at the screen and tell me what changed since the last step. ", 10))
	var steps []time.Duration
	lap := time.Now()
	mark := func() {
		now := time.Now()
		steps = append(steps, now.Sub(lap))
		lap = now
	}
	start := lap

	h.host.ok(http.MethodPost, path+"/messages", map[string]any{"receipt": fmt.Sprintf("turn-%d-user", i), "messages": []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}, "timestamp": 1700000000000 + i},
	}}, nil)
	mark()
	var v view
	h.host.ok(http.MethodGet, path+"/view?wait=turn", nil, &v)
	if v.Unbuilt != 0 || v.Stalled {
		t.Fatalf("turn %d: the view answered with %d lines unbuilt (stalled %v: %v)", i, v.Unbuilt, v.Stalled, v.LastError)
	}
	mark()
	msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}, "timestamp": 1}}
	for k, ref := range h.refs {
		msgs = append(msgs, map[string]any{"role": "toolResult", "toolCallId": fmt.Sprint("c", k), "toolName": "screenshot",
			"content": []any{map[string]any{"type": "text", "text": "[image " + ref + "]"}}, "isError": false, "timestamp": 2 + k})
	}
	var restored struct {
		Restored []string `json:"restored"`
	}
	h.host.ok(http.MethodPost, path+"/hooks/before-request", map[string]any{"format": "pi", "request": map[string]any{"systemPrompt": "be brief", "messages": msgs}}, &restored)
	if len(restored.Restored) != 6 {
		t.Fatalf("turn %d: restored %v, want 6 images", i, restored.Restored)
	}
	mark()
	content := h.offload(uint64(i) * 2)
	mark()
	call := fmt.Sprintf("call-%d", i)
	h.host.ok(http.MethodPost, path+"/messages", map[string]any{"receipt": fmt.Sprintf("turn-%d-tool", i), "messages": []any{
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": call, "name": "screenshot", "arguments": map[string]any{}}}},
		map[string]any{"role": "toolResult", "toolCallId": call, "toolName": "screenshot", "content": content, "isError": false},
	}}, nil)
	mark()
	h.turn = append(h.turn, time.Since(start))
	for k, d := range steps {
		h.took[k] = append(h.took[k], d)
	}
}

// localServer runs `durachat serve` (what make run runs) on the embedded
// stores in a temporary directory, with one bearer token.
func localServer(t *testing.T, token string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "durachat")
	build := exec.Command("go", "build", "-o", bin, "./cmd/durachat")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the local server: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DURACHAT_DATA="+t.TempDir(), "DURACHAT_TOKENS="+token+"=local", "DURACHAT_LOG_LEVEL=error")
	return testenv.Serve(t, cmd)
}

// TestHostTurnsOnTheDeployedShapeAgainstTheLocalServer plays 200 host
// turns, one client at a time, on the stack and on the local server (make
// run), alternating a turn on each so that both see the same machine, and
// reports each one's turn time at p50 and p90, each step's p50, and the
// ratio of the p50s. Both compact with the offline model.
func TestHostTurnsOnTheDeployedShapeAgainstTheLocalServer(t *testing.T) {
	turnRuns(t)
	const turns = 200
	const token = "turn-runs-token-0123456789"
	s := startStack(t, stack.Options{})
	onStack := newHostTurns(api{t: t, base: s.URL, token: s.DevToken}, "turns-stack")
	onRun := newHostTurns(api{t: t, base: localServer(t, token), token: token}, "turns-run")
	// A few turns on each first, so that every function is warm.
	for i := range 5 {
		onStack.play(-1 - i)
		onRun.play(-1 - i)
	}
	for _, h := range []*hostTurns{onStack, onRun} {
		h.turn = nil
		h.took = make([][]time.Duration, len(turnSteps))
	}
	for i := range turns {
		onStack.play(i)
		onRun.play(i)
	}
	stackP50, runP50 := percentile(onStack.turn, 50), percentile(onRun.turn, 50)
	t.Logf("RESULT %d turns, one client: stack p50 %v (p90 %v), make run p50 %v (p90 %v): %.2fx", turns,
		stackP50, percentile(onStack.turn, 90), runP50, percentile(onRun.turn, 90), float64(stackP50)/float64(runP50))
	for k, step := range turnSteps {
		t.Logf("RESULT   %v: stack p50 %v, make run p50 %v", step, percentile(onStack.took[k], 50), percentile(onRun.took[k], 50))
	}
}

// TestAppendsKeepTheirLatencyWhileAHundredViewsWait: 200 appends, one
// after the other, timed alone and then while 100 hosts each wait in
// view?wait=turn on their own chat, whose leaf the model takes longer to
// build than the run lasts (so every view waits its full 20 s, and is
// asked again). The views run in the view function, the appends in the
// memory function; the report is the appends' p50 and p99 in both phases.
func TestAppendsKeepTheirLatencyWhileAHundredViewsWait(t *testing.T) {
	turnRuns(t)
	const views, appends = 100, 200
	release := make(chan struct{})
	var releaseOnce sync.Once
	stopModel := func() { releaseOnce.Do(func() { close(release) }) }
	model := openaitest.New(t, func(int, openaitest.Request) openaitest.Reply {
		// Until the run ends: past the compact function's 120 s its
		// invocation times out, and the batch stays in the queue for the
		// visibility timeout, so the leaves stay unbuilt either way.
		<-release
		return openaitest.Reply{Text: "a summary"}
	})
	t.Cleanup(stopModel) // before the server closes: it waits for its handlers
	s := startStack(t, stack.Options{TableFaults: true, Model: "openai:scripted", ModelURL: model.BaseURL(), ModelKey: openaitest.APIKey})
	host := api{t: t, base: s.URL, token: s.DevToken}

	appendRun := func(chat string) []time.Duration {
		var took []time.Duration
		for i := range appends {
			start := time.Now()
			host.ok(http.MethodPost, "/v1/chats/"+chat+"/messages", map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("short message %d", i)}}, "timestamp": 1700000000000 + i},
			}}, nil)
			took = append(took, time.Since(start))
		}
		return took
	}
	// Every table request, counted through the stack's proxy in front of
	// dynalite, for the reads the waiting views cost.
	var tableCalls atomic.Int64
	s.DynamoDB.Faults.Set(func(*http.Request) (stack.Answer, bool) {
		tableCalls.Add(1)
		return stack.Answer{}, false
	})
	timed := func(run func()) (calls int64, took time.Duration) {
		before, start := tableCalls.Load(), time.Now()
		run()
		return tableCalls.Load() - before, time.Since(start)
	}
	appendRun("warm") // every function warm
	var alone []time.Duration
	aloneCalls, aloneTook := timed(func() { alone = appendRun("alone") })

	// Each waiting chat has one long message, which the model holds.
	long := strings.Repeat("a long message that the scripted model takes its time to summarize. ", 10)
	for v := range views {
		host.ok(http.MethodPost, fmt.Sprintf("/v1/chats/waiting-%d/messages", v), map[string]any{"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": long}}, "timestamp": 1700000000000},
		}}, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var answered, failed atomic.Int64
	var firstFailure atomic.Value
	for v := range views {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/chats/waiting-%d/view?wait=turn", s.URL, v), nil)
				req.Header.Set("Authorization", "Bearer "+s.DevToken)
				res, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				var got view
				err = json.NewDecoder(res.Body).Decode(&got)
				res.Body.Close()
				if ctx.Err() != nil {
					return // the body was cut short by the run's end
				}
				if res.StatusCode != http.StatusOK || err != nil || got.Unbuilt != 1 {
					if failed.Add(1) == 1 {
						firstFailure.Store(fmt.Sprintf("%d %v %+v", res.StatusCode, err, got))
					}
					continue
				}
				answered.Add(1)
			}
		})
	}
	viewFn := s.Functions["ViewFunction"]
	for deadline := time.Now().Add(2 * time.Minute); viewFn.Busy() < views; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d views are waiting after 2 minutes", viewFn.Busy(), views)
		}
	}
	busyBefore := viewFn.Busy()
	var waiting []time.Duration
	waitingCalls, waitingTook := timed(func() { waiting = appendRun("while-waiting") })
	busyAfter := viewFn.Busy()
	// The views alone, with no append running, for their own rate.
	viewCalls, viewTook := timed(func() { time.Sleep(20 * time.Second) }) // one wait's length
	cancel()
	wg.Wait()
	// Alone again, for how much the machine itself drifted meanwhile.
	after := appendRun("alone-after")
	stopModel()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d views failed or answered with the leaf built, the first: %v", n, firstFailure.Load())
	}
	both := append(slices.Clone(alone), after...)
	t.Logf("RESULT appends alone: p50 %v, p99 %v (before the views), p50 %v, p99 %v (after); while %d views wait (%d to %d view invocations running, %d view environments started, %d answered meanwhile): p50 %v, p99 %v: p99 %.2fx the %d alone's",
		percentile(alone, 50), percentile(alone, 99), percentile(after, 50), percentile(after, 99),
		views, busyBefore, busyAfter, viewFn.ColdStarts(), answered.Load(),
		percentile(waiting, 50), percentile(waiting, 99), float64(percentile(waiting, 99))/float64(percentile(both, 99)), len(both))
	perSecond := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
	t.Logf("RESULT table requests: appends alone %.0f/s (%.1f per append); while the views wait %.0f/s; the %d views alone %.0f/s, %.1f a second per waiting view",
		perSecond(aloneCalls, aloneTook), float64(aloneCalls)/appends, perSecond(waitingCalls, waitingTook),
		views, perSecond(viewCalls, viewTook), perSecond(viewCalls, viewTook)/views)
	t.Logf("RESULT memory function environments started: %d", s.Functions["MemoryFunction"].ColdStarts())
}
