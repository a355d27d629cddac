//go:build linux

package stack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
)

// LoadRunsEnv turns on the load runs (make stack-load): minutes each, on
// a stack of their own. The figures are in docs/scale.md.
//
// DURACHAT_LOAD_CHATS (120), DURACHAT_LOAD_SECONDS (180: how long the
// hosts loop), DURACHAT_LOAD_MODEL_DELAY (1s: the scripted model's time
// per call) and DURACHAT_LOAD_CONCURRENCY (2,4: the BuildConcurrency
// values run before the defaults; "none" runs the defaults alone) shape
// them; DURACHAT_LOAD_PARAMS (Name=value,...) sets template parameters in
// every run, the defaults' included, to try other values of the knobs.
const LoadRunsEnv = "DURACHAT_LOAD_RUNS"

// loadProfile is the active chat of docs/scale.md's load run: a host in a
// loop that logs two messages of about messageBytes and waits for the view
// (view?wait=turn), once every period.
type loadProfile struct {
	chats        int
	period       time.Duration
	load         time.Duration // how long the hosts loop
	messageBytes int
	modelDelay   time.Duration
	// converge bounds the wait for every node after the last turn.
	converge time.Duration
}

// The targets of the issue, with the template's defaults.
const (
	targetViewP50     = 2 * time.Second
	targetAppendP99   = 1500 * time.Millisecond
	targetLastBuilt   = 10 * time.Second
	loadReadBackLimit = 100 // messages a read-back page asks for
)

func TestLoadRunsOnTheDeployedShape(t *testing.T) {
	if os.Getenv(LoadRunsEnv) == "" {
		t.Skipf("set %s=1 (make stack-load) to run the load runs", LoadRunsEnv)
	}
	p := loadProfile{
		chats:        envInt(t, "DURACHAT_LOAD_CHATS", 120),
		period:       10 * time.Second,
		load:         time.Duration(envInt(t, "DURACHAT_LOAD_SECONDS", 180)) * time.Second,
		messageBytes: 700,
		modelDelay:   envDuration(t, "DURACHAT_LOAD_MODEL_DELAY", time.Second),
		converge:     10 * time.Minute,
	}
	sweep := os.Getenv("DURACHAT_LOAD_CONCURRENCY")
	if sweep == "" {
		sweep = "2,4"
	}
	extra := map[string]string{}
	if v := os.Getenv("DURACHAT_LOAD_PARAMS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("DURACHAT_LOAD_PARAMS: %q is not Name=value", kv)
			}
			extra[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	with := func(k, v string) map[string]string {
		m := maps.Clone(extra)
		if k != "" {
			m[k] = v
		}
		return m
	}
	var reports []loadReport
	if sweep != "none" {
		for _, v := range strings.Split(sweep, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("DURACHAT_LOAD_CONCURRENCY: %q is not a number", v)
			}
			t.Run(fmt.Sprintf("BuildConcurrency%d", n), func(t *testing.T) {
				rep := loadRun(t, p, with("BuildConcurrency", strconv.Itoa(n)))
				rep.check(t, false)
				reports = append(reports, rep)
			})
		}
	}
	t.Run("WithTheDefaultsViewsAppendsAndBuildsMeetTheirTargets", func(t *testing.T) {
		rep := loadRun(t, p, with("", ""))
		rep.check(t, true)
		reports = append(reports, rep)
	})
	t.Logf("profile: %d chats, each 2 messages of %d bytes and a view?wait=turn every %s, for %s; the model answers in %s",
		p.chats, p.messageBytes, p.period, p.load, p.modelDelay)
	for _, rep := range reports {
		t.Log(rep.summary())
	}
}

// loadReport is what one run measured.
type loadReport struct {
	name             string
	chats            int
	buildConcurrency string
	elapsed          time.Duration // first append to the last node built
	loadPhase        time.Duration

	appends, views, messages, readBack int64
	refused                            int64 // 503, 429, 500 answers a host retried
	errors                             []string
	lost                               int64 // messages accepted and not read back as sent
	unbuiltNodes                       int64 // nodes not built when the run gave up
	viewsUnbuilt                       int64 // views that answered with placeholders
	appendLatency, viewLatency         []time.Duration
	lastBuilt                          []time.Duration // per chat: last turn to every node built

	buildsDone, modelCalls int64   // build messages the compact function finished; model calls
	buildRate, peakRate    float64 // builds/s over the run, and over the busiest 10 s
	backlogMax             int
	nodes, built           int64
	inputBytes, outputB    int64 // model prompts and replies

	functions map[string]stack.Usage
	dynamo    *opCounter
	sqsOps    *opCounter
	s3Ops     *opCounter

	load       machineLoad
	rssOwnMB   float64 // the test process's peak
	rssStackMB float64 // the function processes at the end
	envs       map[string]int
}

func (r *loadReport) check(t *testing.T, targets bool) {
	t.Helper()
	for _, e := range r.errors {
		t.Error(e)
	}
	if r.lost != 0 || r.unbuiltNodes != 0 {
		t.Errorf("%d messages lost, %d nodes unbuilt", r.lost, r.unbuiltNodes)
	}
	if r.readBack != r.messages {
		t.Errorf("%d messages read back, %d logged", r.readBack, r.messages)
	}
	t.Log(r.summary())
	if !targets {
		return
	}
	if r.refused != 0 {
		t.Errorf("%d requests refused", r.refused)
	}
	if p := percentile(r.viewLatency, 50); p > targetViewP50 {
		t.Errorf("views answered in %s at p50, over %s", p, targetViewP50)
	}
	if p := percentile(r.appendLatency, 99); p > targetAppendP99 {
		t.Errorf("appends answered in %s at p99, over %s", p, targetAppendP99)
	}
	if p := percentile(r.lastBuilt, 100); p > targetLastBuilt {
		t.Errorf("the last node of a chat was built %s after its last turn, over %s", p, targetLastBuilt)
	}
}

func (r *loadReport) summary() string {
	var b strings.Builder
	secs := r.elapsed.Seconds()
	fmt.Fprintf(&b, "%s: %d chats, BuildConcurrency %s, load %s, run %s\n", r.name, r.chats, r.buildConcurrency,
		r.loadPhase.Round(time.Second), r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  requests: %d appends (%d messages), %d views; %d refused; %d views answered unbuilt; %d errors\n",
		r.appends, r.messages, r.views, r.refused, r.viewsUnbuilt, len(r.errors))
	fmt.Fprintf(&b, "  append  p50 %s p99 %s max %s\n", percentile(r.appendLatency, 50), percentile(r.appendLatency, 99), percentile(r.appendLatency, 100))
	fmt.Fprintf(&b, "  view    p50 %s p99 %s max %s\n", percentile(r.viewLatency, 50), percentile(r.viewLatency, 99), percentile(r.viewLatency, 100))
	fmt.Fprintf(&b, "  last turn to every node built: p50 %s max %s\n", percentile(r.lastBuilt, 50), percentile(r.lastBuilt, 100))
	fmt.Fprintf(&b, "  builds: %d done, %.1f/s over the run, %.1f/s in the busiest 10 s; %d model calls (%.2f a message); backlog at most %d\n",
		r.buildsDone, r.buildRate, r.peakRate, r.modelCalls, float64(r.modelCalls)/float64(max(r.messages, 1)), r.backlogMax)
	fmt.Fprintf(&b, "  tree: %d nodes, %d built, %d unbuilt; %d messages read back as sent, %d lost\n", r.nodes, r.built, r.unbuiltNodes, r.readBack, r.lost)
	fmt.Fprintf(&b, "  model: %.0f prompt bytes and %.0f reply bytes a call\n",
		float64(r.inputBytes)/float64(max(r.modelCalls, 1)), float64(r.outputB)/float64(max(r.modelCalls, 1)))
	names := make([]string, 0, len(r.functions))
	for n := range r.functions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u := r.functions[n]
		fmt.Fprintf(&b, "  %-16s %6d invocations (%.2f/s), %7.1f s in environments (%.0f ms each), %.1f s waiting for one, %d environments, %d cold starts\n",
			n, u.Invocations, float64(u.Invocations)/secs, u.Duration.Seconds(), float64(u.Duration.Milliseconds())/float64(max(u.Invocations, 1)),
			u.Waited.Seconds(), r.envs[n], u.ColdStarts)
	}
	for _, c := range []struct {
		name string
		ops  *opCounter
	}{{"DynamoDB", r.dynamo}, {"SQS", r.sqsOps}, {"S3", r.s3Ops}} {
		fmt.Fprintf(&b, "  %s per active chat per second (requests; DynamoDB: items, a batch counting each):%s\n", c.name, c.ops.rates(float64(r.chats)*secs))
	}
	fmt.Fprintf(&b, "  machine: %d cores, %.0f%% busy (the run's processes %.0f%%), load average %.1f mean, %.1f max; memory: the test process %.0f MB at peak, the function processes %.0f MB (proportional set size)\n",
		runtime.NumCPU(), 100*r.load.busy, 100*r.load.own, r.load.meanLoad, r.load.maxLoad, r.rssOwnMB, r.rssStackMB)
	fmt.Fprintf(&b, "  the run's CPU by program:%s\n", r.load.programs())
	return b.String()
}

// loadRun runs p against a stack of its own with params, and reports.
func loadRun(t *testing.T, p loadProfile, params map[string]string) (rep loadReport) {
	var inBytes, outBytes atomic.Int64
	model := bedrocktest.New(t, func(n int, req bedrocktest.Request) bedrocktest.Reply {
		inBytes.Add(int64(promptBytes(req)))
		time.Sleep(p.modelDelay)
		text := scriptedLines(n, req)
		outBytes.Add(int64(len(text)))
		return bedrocktest.Reply{Text: text}
	})
	model.Keep(1)
	root := repoRoot(t)
	tpl, err := stack.ReadTemplate(root+"/template.yaml", params, stack.Physical{})
	if err != nil {
		t.Fatal(err)
	}
	// The stack's own warnings (an invocation that failed or timed out)
	// name the cause of an answer a host did not expect.
	warnings := &tail{}
	s := startStack(t, stack.Options{TableFaults: true, Params: params, Model: tpl.Functions["CompactFunction"].Env[config.EnvModel], ModelURL: model.URL,
		Log: slog.New(slog.NewTextHandler(warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer func() {
		if len(rep.errors) > 0 {
			t.Logf("the stack's warnings (last lines):\n%s", warnings)
		}
	}()
	rep = loadReport{name: t.Name(), chats: p.chats, buildConcurrency: strconv.Itoa(s.Pollers[0].Source.MaxConcurrency),
		dynamo: newOpCounter(dynamoOps), sqsOps: newOpCounter(sqsOps), s3Ops: newOpCounter(s3Ops), envs: map[string]int{}}
	s.DynamoDB.Faults.Set(rep.dynamo.tap)
	s.SQS.Faults.Set(rep.sqsOps.tap)
	s.S3.Faults.Set(rep.s3Ops.tap)

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: 4 * p.chats, MaxIdleConnsPerHost: 4 * p.chats}}
	defer hc.CloseIdleConnections()
	poller := s.Pollers[0]
	before := map[string]stack.Usage{}
	for name, f := range s.Functions {
		before[name] = f.Usage()
	}
	doneBefore, callsBefore := poller.Deleted.Load(), model.Count()
	meter := startMachineMeter()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sampler := startSampler(ctx, s, poller)
	start := time.Now()
	results := make([]hostResult, p.chats)
	var wg sync.WaitGroup
	for c := range p.chats {
		wg.Go(func() {
			h := loadHost{base: s.URL, token: s.DevToken, client: hc, chat: fmt.Sprintf("load-%03d", c), p: p}
			offset := p.period * time.Duration(c) / time.Duration(p.chats)
			results[c] = h.run(start.Add(offset), start.Add(p.load))
		})
	}
	wg.Wait()
	end := time.Now()
	rep.loadPhase = p.load
	rep.elapsed = end.Sub(start)
	rep.load = meter.stop()
	cancel()
	samples := sampler.wait()

	for _, r := range results {
		rep.appends += r.appends
		rep.views += r.views
		rep.messages += r.messages
		rep.refused += r.refused
		rep.viewsUnbuilt += r.viewsUnbuilt
		rep.appendLatency = append(rep.appendLatency, r.appendLatency...)
		rep.viewLatency = append(rep.viewLatency, r.viewLatency...)
		if r.converged {
			rep.lastBuilt = append(rep.lastBuilt, r.lastBuilt)
		}
		rep.errors = append(rep.errors, r.errors...)
	}
	rep.buildsDone = poller.Deleted.Load() - doneBefore
	rep.modelCalls = int64(model.Count() - callsBefore)
	rep.inputBytes, rep.outputB = inBytes.Load(), outBytes.Load()
	rep.buildRate = float64(rep.buildsDone) / rep.elapsed.Seconds()
	rep.peakRate, rep.backlogMax = samples.peak(doneBefore)
	rep.functions = map[string]stack.Usage{}
	for name, f := range s.Functions {
		u := f.Usage()
		b := before[name]
		rep.functions[name] = stack.Usage{Invocations: u.Invocations - b.Invocations, Duration: u.Duration - b.Duration,
			Waited: u.Waited - b.Waited, ColdStarts: u.ColdStarts - b.ColdStarts}
		pids := f.Emulators()
		rep.envs[name] = len(pids)
		for _, pid := range pids {
			rep.rssStackMB += rssMB(pid)
			for _, c := range children(t, pid) {
				rep.rssStackMB += rssMB(c)
			}
		}
	}
	rep.rssOwnMB = peakRSSMB()
	// Every logged message reads back as sent, and every node is built.
	h := loadHost{base: s.URL, token: s.DevToken, client: hc, p: p}
	for c := range p.chats {
		h.chat = fmt.Sprintf("load-%03d", c)
		got, lost, err := h.readBack(results[c].messages)
		if err != nil {
			rep.errors = append(rep.errors, fmt.Sprintf("%s: reading back: %v", h.chat, err))
		}
		rep.readBack += got
		rep.lost += lost
		st, err := h.status()
		if err != nil {
			rep.errors = append(rep.errors, fmt.Sprintf("%s: status: %v", h.chat, err))
			continue
		}
		rep.nodes += st.Nodes
		rep.built += st.Built
		rep.unbuiltNodes += st.Unbuilt
		if st.FailedBuilds != 0 || st.MechanicalCount != 0 || st.Entries != results[c].messages {
			rep.errors = append(rep.errors, fmt.Sprintf("%s: %d entries of %d logged, %d failed builds, %d mechanical lines",
				h.chat, st.Entries, results[c].messages, st.FailedBuilds, st.MechanicalCount))
		}
	}
	return rep
}

// loadHost is one active chat's host.
type loadHost struct {
	base, token string
	client      *http.Client
	chat        string
	p           loadProfile
}

type hostResult struct {
	appends, views, messages, refused, viewsUnbuilt int64
	appendLatency, viewLatency                      []time.Duration
	lastBuilt                                       time.Duration
	converged                                       bool
	errors                                          []string
}

// run loops from first until end, one turn a period, then waits until
// every node of the chat is built.
func (h loadHost) run(first, end time.Time) hostResult {
	var r hostResult
	var lastTurn time.Time
	// A host's next turn comes a period after its last began, or at once
	// when the view took longer.
	for at := first; at.Before(end); at = later(at.Add(h.p.period), time.Now()) {
		time.Sleep(time.Until(at))
		for range 2 {
			seq := r.messages
			began := time.Now()
			retried, ids, err := h.append(seq)
			r.refused += int64(retried)
			r.appends++
			if err != nil {
				r.errors = append(r.errors, fmt.Sprintf("%s: message %d: %v", h.chat, seq, err))
				return r
			}
			if ids != 1 {
				r.errors = append(r.errors, fmt.Sprintf("%s: message %d was given %d entries", h.chat, seq, ids))
				return r
			}
			r.appendLatency = append(r.appendLatency, time.Since(began))
			r.messages++
			lastTurn = time.Now()
		}
		began := time.Now()
		var v view
		status, raw, err := h.get("/view?wait=turn", &v)
		r.views++
		switch {
		case err != nil || status != http.StatusOK:
			if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
				r.refused++
				continue
			}
			r.errors = append(r.errors, fmt.Sprintf("%s: view: %d %.200s %v", h.chat, status, raw, err))
			return r
		case v.Unbuilt > 0:
			r.viewsUnbuilt++
		}
		r.viewLatency = append(r.viewLatency, time.Since(began))
	}
	// Every node built: status, at first every 500 ms, then every 5 s.
	deadline := time.Now().Add(h.p.converge)
	for time.Now().Before(deadline) {
		st, err := h.status()
		if err == nil && st.Entries == r.messages && st.Unbuilt == 0 && st.InFlight == 0 {
			r.lastBuilt, r.converged = time.Since(lastTurn), true
			return r
		}
		if time.Since(lastTurn) < 15*time.Second {
			time.Sleep(500 * time.Millisecond)
		} else {
			time.Sleep(5 * time.Second)
		}
	}
	r.errors = append(r.errors, fmt.Sprintf("%s: nodes still unbuilt %s after the last turn", h.chat, h.p.converge))
	return r
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// message is the chat's message seq: a user message or an assistant's
// answer, about messageBytes, the same whenever it is made.
func (h loadHost) message(seq int64) map[string]any {
	var b strings.Builder
	fmt.Fprintf(&b, "Message %d of %s. ", seq, h.chat)
	words := []string{"the build", "a screenshot", "the failing test", "its log", "the config", "a retry", "the deploy", "one table"}
	for i := 0; b.Len() < h.p.messageBytes; i++ {
		fmt.Fprintf(&b, "Step %d checks %s against %s. ", i, words[(int(seq)+i)%len(words)], words[(int(seq)*3+i)%len(words)])
	}
	if seq%2 == 0 {
		return map[string]any{"role": "user", "content": b.String()}
	}
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": b.String()}}}
}

// append logs message seq, retrying what a host retries.
func (h loadHost) append(seq int64) (retried, entries int, err error) {
	body, err := json.Marshal(map[string]any{"receipt": fmt.Sprintf("%s-%d", h.chat, seq), "messages": []any{h.message(seq)}})
	if err != nil {
		return 0, 0, err
	}
	send := func() (int, []byte, time.Duration, error) { return h.do(http.MethodPost, "/messages", body) }
	return retryAppend(send, time.Now().Add(2*time.Minute))
}

func (h loadHost) do(method, path string, body []byte) (int, []byte, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+"/v1/chats/"+h.chat+path, rd)
	if err != nil {
		return 0, nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	res, err := h.client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	retryAfter, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	return res.StatusCode, raw, time.Duration(retryAfter) * time.Second, err
}

func (h loadHost) get(path string, out any) (int, []byte, error) {
	status, raw, _, err := h.do(http.MethodGet, path, nil)
	if err == nil && status == http.StatusOK {
		err = json.Unmarshal(raw, out)
	}
	return status, raw, err
}

func (h loadHost) status() (wire.Status, error) {
	var st wire.Status
	code, raw, err := h.get("/status", &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%d %.200s", code, raw)
	}
	return st, err
}

// readBack pages through the chat's messages and compares each with what
// was sent: it returns how many read back as sent, and how many of the
// want logged did not.
func (h loadHost) readBack(want int64) (got, lost int64, err error) {
	after := ""
	var seq int64
	for {
		var page struct {
			Messages []struct {
				Seq     int64           `json:"seq"`
				Message json.RawMessage `json:"message"`
			} `json:"messages"`
			Next string `json:"next"`
		}
		q := url.Values{"limit": {strconv.Itoa(loadReadBackLimit)}}
		if after != "" {
			q.Set("after", after)
		}
		code, raw, err := h.get("/messages?"+q.Encode(), &page)
		if err != nil || code != http.StatusOK {
			return got, want - got, fmt.Errorf("%d %.200s %v", code, raw, err)
		}
		for _, m := range page.Messages {
			sent, _ := json.Marshal(h.message(seq))
			if jsonEqual(sent, m.Message) {
				got++
			} else {
				return got, want - got, fmt.Errorf("message %d reads back as %.200s", seq, m.Message)
			}
			seq++
		}
		if page.Next == "" || len(page.Messages) == 0 {
			return got, want - got, nil
		}
		after = page.Next
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// groupLabel finds the nodes a task asks lines for, when it asks for
// several: each is named at the start of a line, "<start>+<count>: ...".
var groupLabel = regexp.MustCompile(`(?m)^(\d+\+\d+): `)

// scriptedLines answers a compaction call: one line, or, when the task
// asks for several lines, one per node it names, each under the node's
// "<start>+<count>|" head.
func scriptedLines(n int, req bedrocktest.Request) string {
	line := fmt.Sprintf("Line %d: the host and the assistant went on with the task.", n)
	var task string
	if len(req.Messages) > 0 {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Text != nil && strings.Contains(*b.Text, "lines only") {
				task = *b.Text
			}
		}
	}
	if task == "" {
		return line
	}
	var b strings.Builder
	for _, m := range groupLabel.FindAllStringSubmatch(task, -1) {
		fmt.Fprintf(&b, "%s|%s\n", m[1], line)
	}
	return b.String()
}

func promptBytes(req bedrocktest.Request) int {
	n := 0
	for _, b := range req.System {
		if b.Text != nil {
			n += len(*b.Text)
		}
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Text != nil {
				n += len(*b.Text)
			}
		}
	}
	return n
}

// percentile is the p-th percentile of d (nearest rank); 0 of none.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)].Round(time.Millisecond)
}

// sampler reads, every 5 s, the build messages done and the queue's
// backlog.
type sampler struct {
	mu      sync.Mutex
	at      []time.Time
	done    []int64
	backlog []int
	stopped chan struct{}
}

func startSampler(ctx context.Context, s *stack.Stack, p *stack.Poller) *sampler {
	sm := &sampler{stopped: make(chan struct{})}
	go func() {
		defer close(sm.stopped)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			n := 0
			out, err := s.SQSClient.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.Queues["BuildQueue"]),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
					sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err == nil {
				for _, v := range out.Attributes {
					k, _ := strconv.Atoi(v)
					n += k
				}
			}
			sm.mu.Lock()
			sm.at, sm.done, sm.backlog = append(sm.at, time.Now()), append(sm.done, p.Deleted.Load()), append(sm.backlog, n)
			sm.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) wait() *sampler {
	<-sm.stopped
	return sm
}

// peak is the highest build rate over 10 s and the largest backlog.
func (sm *sampler) peak(base int64) (rate float64, backlog int) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for i := range sm.at {
		backlog = max(backlog, sm.backlog[i])
		if i >= 2 {
			rate = max(rate, float64(sm.done[i]-sm.done[i-2])/sm.at[i].Sub(sm.at[i-2]).Seconds())
		}
	}
	return rate, backlog
}

// opCounter counts the requests a backend receives, by the class op
// gives each (an operation and the keys it names).
type opCounter struct {
	classify func(r *http.Request, body []byte) []string
	mu       sync.Mutex
	n        map[string]int64
}

func newOpCounter(classify func(r *http.Request, body []byte) []string) *opCounter {
	return &opCounter{classify: classify, n: map[string]int64{}}
}

// tap is a Faults rule that counts and injects nothing.
func (c *opCounter) tap(r *http.Request) (stack.Answer, bool) {
	var body []byte
	if r.Body != nil && r.Method == http.MethodPost {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	classes := c.classify(r, body)
	c.mu.Lock()
	for _, k := range classes {
		c.n[k]++
	}
	c.mu.Unlock()
	return stack.Answer{}, false
}

// rates lists the counts per chatSeconds, largest first.
func (c *opCounter) rates(chatSeconds float64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return c.n[keys[i]] > c.n[keys[j]] || c.n[keys[i]] == c.n[keys[j]] && keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n    %-44s %8.4f (%d)", k, float64(c.n[k])/chatSeconds, c.n[k])
	}
	return b.String()
}

// dynamoOps classes a DynamoDB request by its operation and, for each
// item it names, the item's kind in the key layout (store/keys.go): one
// class per item, so a batch counts each of its items.
func dynamoOps(r *http.Request, body []byte) []string {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	var req struct {
		Key, Item                 map[string]attr
		ExpressionAttributeValues map[string]attr
		RequestItems              map[string]json.RawMessage
		TransactItems             []map[string]struct{ Key, Item map[string]attr }
	}
	if json.Unmarshal(body, &req) != nil {
		return []string{op}
	}
	class := func(op string, key map[string]attr) string { return op + " " + keyKind(key["pk"].S, key["sk"].S) }
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		return []string{class(op, req.Key)}
	case "PutItem":
		return []string{class(op, req.Item)}
	case "Query":
		var pk, sk string
		for _, v := range req.ExpressionAttributeValues {
			switch {
			case pk == "" && isPartition(v.S):
				pk = v.S
			case sk == "":
				sk = v.S
			}
		}
		return []string{class(op, map[string]attr{"pk": {S: pk}, "sk": {S: sk}})}
	case "TransactWriteItems", "TransactGetItems":
		var out []string
		for _, it := range req.TransactItems {
			for kind, x := range it {
				k := x.Key
				if k == nil {
					k = x.Item
				}
				out = append(out, class(op+"."+kind, k))
			}
		}
		return out
	case "BatchGetItem", "BatchWriteItem":
		var out []string
		for _, raw := range req.RequestItems {
			var get struct{ Keys []map[string]attr }
			var write []struct {
				PutRequest    *struct{ Item map[string]attr }
				DeleteRequest *struct{ Key map[string]attr }
			}
			if json.Unmarshal(raw, &get) == nil && len(get.Keys) > 0 {
				for _, k := range get.Keys {
					out = append(out, class(op, k))
				}
			} else if json.Unmarshal(raw, &write) == nil {
				for _, w := range write {
					switch {
					case w.PutRequest != nil:
						out = append(out, class(op+".Put", w.PutRequest.Item))
					case w.DeleteRequest != nil:
						out = append(out, class(op+".Delete", w.DeleteRequest.Key))
					}
				}
			}
		}
		return out
	}
	return []string{op}
}

type attr struct{ S string }

func isPartition(v string) bool {
	for _, p := range []string{"chat/", "chats/", "imgrefs/", "retention", "healthz"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// keyKind names an item's kind in the key layout.
func keyKind(pk, sk string) string {
	part := "?"
	switch {
	case strings.HasPrefix(pk, "chats/"):
		part = "chats/<tenant>"
	case strings.HasPrefix(pk, "imgrefs/"):
		part = "imgrefs/<tenant>/<image>"
	case strings.HasPrefix(pk, "chat/") && strings.Contains(pk, "~"):
		part = "chat/<tenant>/<chat>~<inc>"
	case strings.HasPrefix(pk, "chat/"):
		part = "chat/<tenant>/<chat>"
	case pk != "":
		part = pk
	}
	kind := sk
	if i := strings.IndexByte(sk, '/'); i >= 0 {
		kind = sk[:i+1] + "*"
	}
	if kind == "" {
		kind = "(all)"
	}
	return part + " " + kind
}

// sqsOps classes an SQS request by its action (JSON protocol).
func sqsOps(r *http.Request, body []byte) []string {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	if op == "" {
		op = r.URL.Query().Get("Action")
	}
	return []string{op}
}

// s3Ops classes an S3 request by its method and the key's first segment.
func s3Ops(r *http.Request, _ []byte) []string {
	// Path style: /<bucket>/<key>.
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	prefix := ""
	if len(parts) > 1 {
		prefix = parts[1] + "/"
	}
	return []string{r.Method + " " + prefix}
}

// machineLoad is how busy the machine was during a run: the CPU share in
// use (of every core), the share the run's own processes used (by
// program: the test process with the gateway, S3 and the event source,
// the emulators, the functions, the Node servers), and the 1-minute load
// average.
type machineLoad struct {
	busy, own         float64
	byProgram         map[string]float64 // CPU seconds
	meanLoad, maxLoad float64

	before                  map[string]float64
	idleBefore, totalBefore float64
	began                   time.Time
	loads                   []float64
	stopped, quit           chan struct{}
}

func startMachineMeter() *machineLoad {
	m := &machineLoad{began: time.Now(), stopped: make(chan struct{}), quit: make(chan struct{})}
	m.idleBefore, m.totalBefore = cpuTimes()
	m.before = ownCPU()
	go func() {
		defer close(m.stopped)
		for {
			if l, ok := loadAverage(); ok {
				m.loads = append(m.loads, l)
			}
			select {
			case <-m.quit:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return m
}

func (m *machineLoad) stop() machineLoad {
	close(m.quit)
	<-m.stopped
	idle, total := cpuTimes()
	if d := total - m.totalBefore; d > 0 {
		m.busy = 1 - (idle-m.idleBefore)/d
	}
	m.byProgram = map[string]float64{}
	own := 0.0
	for prog, c := range ownCPU() {
		m.byProgram[prog] = c - m.before[prog]
		own += c - m.before[prog]
	}
	m.own = own / (time.Since(m.began).Seconds() * float64(runtime.NumCPU()))
	for _, l := range m.loads {
		m.meanLoad += l / float64(len(m.loads))
		m.maxLoad = max(m.maxLoad, l)
	}
	return *m
}

// programs lists the CPU seconds by program, largest first.
func (m machineLoad) programs() string {
	names := make([]string, 0, len(m.byProgram))
	for n := range m.byProgram {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m.byProgram[names[i]] > m.byProgram[names[j]] })
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s %.0f s,", n, m.byProgram[n])
	}
	return strings.TrimSuffix(b.String(), ",")
}

// cpuTimes are the machine's idle and total CPU seconds (/proc/stat).
func cpuTimes() (idle, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle / 100, total / 100
}

func loadAverage() (float64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// ownCPU is the CPU seconds of this process and every process below it
// (the servers, the emulators and the functions), living or waited for,
// by program name.
func ownCPU() map[string]float64 {
	self := os.Getpid()
	type proc struct {
		ppid int
		name string
		cpu  float64
	}
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15) cutime(16) cstime(17).
		open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(string(data[closing+2:]))
		if len(f) < 15 {
			continue
		}
		p := proc{name: string(data[open+1 : closing])}
		p.ppid, _ = strconv.Atoi(f[1])
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(f[i], 64)
			p.cpu += v / 100
		}
		procs[pid] = p
	}
	out := map[string]float64{}
	for pid, p := range procs {
		for q := pid; q > 1; q = procs[q].ppid {
			if q == self {
				name := p.name
				if pid == self {
					name = "test process"
				}
				out[name] += p.cpu
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return out
}

// rssMB is a process's share of resident memory now (its proportional
// set size: the pages it shares with other processes, such as the
// binary's, divided among them), so that the sum over many processes of
// one binary is the memory they take.
func rssMB(pid int) float64 { return procMB(strconv.Itoa(pid), "smaps_rollup", "Pss:") }

// peakRSSMB is this process's peak resident memory.
func peakRSSMB() float64 { return procMB("self", "status", "VmHWM:") }

func procMB(pid, file, field string) float64 {
	data, err := os.ReadFile("/proc/" + pid + "/" + file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s=%q: want a duration such as 1s", name, v)
	}
	return d
}

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/../.."
}
