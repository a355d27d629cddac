package memory

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/tasks"
)

func TestViewWaitDefaultsToTwentySecondsUnderTheGatewayCeiling(t *testing.T) {
	f := newFixture(t)
	if f.m.wait != 20*time.Second {
		t.Fatalf("default view wait %s, want 20s (the HTTP API gives up at 30s)", f.m.wait)
	}
}

// TestMemoryWithoutACompactorServesAndSchedules is the memory API
// function: it has no compactor, so it builds nothing, yet it answers
// every route, schedules builds for the compaction function, and shows
// what that function built.
func TestMemoryWithoutACompactorServesAndSchedules(t *testing.T) {
	f := newFixture(t)
	api, err := New(Config{Table: f.table, Transcript: f.log, Images: f.images, Queue: f.queue, Now: f.clock.Now,
		Logger: discardLogger(), Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	builder := f.m
	f.m = api
	f.append(t, "user", long(0), "short one")

	sent := f.queue.take()
	if labels(nodesOf(sent)) != "0+1, 1+1" {
		t.Fatalf("the API memory scheduled %s, want both leaves", labels(nodesOf(sent)))
	}
	if err := api.Build(context.Background(), f.tenant, f.chat, 0, 0); !errors.Is(err, ErrNoCompactor) {
		t.Fatalf("Build without a compactor: %v", err)
	}

	// wait=turn ends at its bound: nothing is built, yet nothing stalled.
	rec, out := f.serve(t, "GET", "/v1/chats/c1/view?wait=turn", nil)
	if rec.Code != 200 || out["unbuilt"] != 2.0 || out["stalled"] != false || !strings.Contains(out["view"].(string), Placeholder) {
		t.Fatalf("view: %d %v", rec.Code, out)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 1})
	if text, isErr := resultText(t, out); isErr || text != "user: short one" {
		t.Errorf("zoom 1 = %q", text)
	}
	_, out = f.serve(t, "POST", "/v1/chats/c1/tools/zoom", map[string]any{"id": 0, "n": 2})
	if text, _ := resultText(t, out); !strings.Contains(text, "0+1|not summarized yet") {
		t.Errorf("zoom 0+2 = %q", text)
	}
	for _, path := range []string{"/v1/chats/c1/status", "/v1/chats/c1/tools"} {
		if rec, _ := f.serve(t, "GET", path, nil); rec.Code != 200 {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	if _, out := f.serve(t, "GET", "/v1/chats/c1/status", nil); out["inFlight"] != 2.0 {
		t.Errorf("status in flight = %v", out["inFlight"])
	}
	if f.comp.total() != 0 {
		t.Fatalf("a route built something: %d compactor calls", f.comp.total())
	}

	// The compaction function builds them; the API memory shows the lines.
	f.queue.msgs = sent
	f.m = builder
	f.deliverAll(t)
	f.m = api
	_, out = f.serve(t, "GET", "/v1/chats/c1/view?wait=turn", nil)
	if out["unbuilt"] != 0.0 || !strings.Contains(out["view"].(string), "1+1|user: short one") {
		t.Errorf("view after the builds: %v", out)
	}
}

func TestOnlyRefusalsOfTheNodeCountTowardAMechanicalLine(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		counts bool
	}{
		{"refused", model.RefusedError(model.ErrRefused), true},
		{"invalid request", model.StatusError(400, errors.New("invalid request")), true},
		{"rejected image after the names-only call", model.StatusError(400, errors.New("could not process image")), true},
		{"bad key", model.StatusError(401, errors.New("invalid x-api-key")), false},
		{"no permission", model.StatusError(403, errors.New("access denied")), false},
		{"unknown model", model.StatusError(404, errors.New("model not found")), false},
		{"no quota", &model.Error{Status: 429, Err: errors.New("insufficient quota")}, false},
		{"throttled", model.StatusError(429, errors.New("slow down")), false},
		{"overloaded", model.StatusError(529, errors.New("overloaded")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.comp.script = func(CompactRequest) (Compacted, error) { return Compacted{Attempts: 1}, tt.err }
			f.append(t, "user", long(0))
			f.queue.take()
			builds := 2 * RefusalLimit
			for k := 0; k < builds; k++ {
				if err := build(t, f, Node{0, 0}); err == nil {
					break
				}
				f.clock.Add(DefaultRetry)
			}
			row, built := f.row(t, Node{0, 0})
			if tt.counts {
				if !built || !row.Mechanical || f.comp.callsOf("0+1") != RefusalLimit {
					t.Fatalf("after %d calls: built %v, row %+v; want a mechanical line after %d", f.comp.callsOf("0+1"), built, row, RefusalLimit)
				}
				return
			}
			st := f.state(t)
			if built || st.MechanicalCount != 0 || st.Retries[0].Refusals != 0 || st.Retries[0].Failures != builds {
				t.Fatalf("an error about the account, not the node, made a line or counted: built %v, retry %+v", built, st.Retries)
			}
		})
	}
}

func TestRefusedShortImageLeafKeepsItsWords(t *testing.T) {
	f := imageFixture(t)
	f.comp.script = func(CompactRequest) (Compacted, error) {
		return Compacted{Attempts: 1, Attached: 1}, model.RefusedError(model.ErrRefused)
	}
	text := "is this rash anything to worry about? " + refs.Ref(kept)
	f.append(t, "user", text)
	f.queue.take()
	for k := 1; k < RefusalLimit; k++ {
		if err := build(t, f, Node{0, 0}); err == nil {
			t.Fatalf("refusal %d built the leaf", k)
		}
		f.clock.Add(DefaultRetry)
	}
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	row, _ := f.row(t, Node{0, 0})
	if row.Text != "user: "+text || !row.Verbatim || !row.Mechanical {
		t.Fatalf("leaf %+v, want its words kept, listed as the refusal fallback", row)
	}
	s, err := f.m.Status(context.Background(), f.tenant, f.chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Mechanical) != 1 || s.Mechanical[0].Line != "user: "+text {
		t.Errorf("status mechanical = %+v", s.Mechanical)
	}
}

// blockUntilDone makes f's compactor answer only when its context ends.
func blockUntilDone(f *fixture) {
	f.comp.delay = time.Hour
}

func TestBuildStopsBeforeItsLeaseAndRecordsTheFailure(t *testing.T) {
	f := newFixture(t)
	f.m.claimLease = 300 * time.Millisecond
	blockUntilDone(f)
	f.append(t, "user", long(0))
	f.queue.take()
	err := build(t, f, Node{0, 0})
	var re *RetryError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a build past its lease returned %v", err)
	}
	st := f.state(t)
	if len(st.Claims) != 0 || st.waiting() != 1 || st.Retries[0].Refusals != 0 {
		t.Fatalf("claims %+v, retries %+v: the failure is not recorded as a retry", st.Claims, st.Retries)
	}
}

func TestCancelledBuildStillRecordsItsFailure(t *testing.T) {
	f := newFixture(t)
	blockUntilDone(f)
	f.append(t, "user", long(0))
	f.queue.take()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	if err := f.m.Build(ctx, f.tenant, f.chat, 0, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled build returned %v", err)
	}
	// The claim is released now, not left to lapse with its lease.
	if st := f.state(t); len(st.Claims) != 0 || st.waiting() != 1 {
		t.Fatalf("claims %+v, waiting %d", st.Claims, st.waiting())
	}
}

func TestHandleBatchTurnsAPanickingBuildIntoAnItemFailure(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if c.Index == 1 {
			panic("a bug in a compactor")
		}
		return Compacted{Line: "ok", Attempts: 1}, nil
	}
	f.retrier = &fakeRetrier{}
	f.append(t, "user", long(0), long(1))
	if failed := f.consumer().HandleBatch(context.Background(), deliveries(f.queue.take())); len(failed) != 1 || failed[0] != "b" {
		t.Fatalf("failures %q: want only the panicking build reported", failed)
	}
	if _, ok := f.row(t, Node{0, 0}); !ok {
		t.Error("the other build of the batch was lost")
	}
}

func TestHandleBatchStopsBuildsBeforeTheFunctionDeadline(t *testing.T) {
	f := newFixture(t)
	retrier := &fakeRetrier{}
	f.retrier = retrier
	blockUntilDone(f)
	f.append(t, "user", long(0))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Second))
	defer cancel()
	if failed := f.consumer().HandleBatch(ctx, deliveries(f.queue.take())); len(failed) != 1 {
		t.Fatalf("failures %q", failed)
	}
	if ctx.Err() != nil {
		t.Fatal("the batch ran into the function's deadline")
	}
	if len(retrier.calls) != 1 || retrier.calls[0].delay != DefaultRetry {
		t.Errorf("the message was not delayed 10 s: %+v", retrier.calls)
	}
	if st := f.state(t); len(st.Claims) != 0 || st.waiting() != 1 {
		t.Errorf("claims %+v, waiting %d", st.Claims, st.waiting())
	}
}

// TestDeadLetteredMessageCannotStrandItsNode: SQS gives up on a message
// after its receive limit and moves it to the dead-letter queue; the node
// is still found by the next scheduler run once its retry is due.
func TestDeadLetteredMessageCannotStrandItsNode(t *testing.T) {
	f := newFixture(t)
	down := true
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		if down {
			return Compacted{}, model.StatusError(503, errors.New("unavailable"))
		}
		return Compacted{Line: "summary", Attempts: 1}, nil
	}
	f.retrier = &fakeRetrier{}
	f.append(t, "user", long(0))
	for k := 0; k < 3; k++ { // each receive fails; then SQS dead-letters it
		if failed := f.consumer().HandleBatch(context.Background(), deliveries([]sent{{msg: tasks.For(tasks.Build, chatid.Chat{Tenant: f.tenant, ID: f.chat})}})); len(failed) != 1 {
			t.Fatalf("receive %d: %q", k, failed)
		}
		f.clock.Add(DefaultRetry)
	}
	f.queue.take()
	down = false
	if rec, _ := f.serve(t, "GET", "/v1/chats/c1/status", nil); rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	again := f.queue.take()
	if labels(nodesOf(again)) != "0+1" {
		t.Fatalf("the next API call sent %s, want 0+1 again", labels(nodesOf(again)))
	}
	f.queue.msgs = again
	f.deliverAll(t)
	if line, built, err := f.m.NodeLine(context.Background(), f.tenant, f.chat, 0, 0); err != nil || !built || line != "summary" {
		t.Errorf("leaf %q built %v err %v", line, built, err)
	}
}

func TestNodeLineReadsOneNodeAsTheViewShowsIt(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "first\r\nline", "second")
	f.deliverAll(t)
	f.append(t, "user", long(2))
	tests := []struct {
		l     int
		i     int64
		line  string
		built bool
	}{
		{0, 0, "user: first line", true},
		{1, 0, "user: first line user: second", true},
		{0, 2, "", false},
		{5, 0, "", false},
	}
	for _, tt := range tests {
		line, built, err := f.m.NodeLine(context.Background(), f.tenant, f.chat, tt.l, tt.i)
		if err != nil || line != tt.line || built != tt.built {
			t.Errorf("NodeLine(%d, %d) = %q, %v, %v; want %q, %v", tt.l, tt.i, line, built, err, tt.line, tt.built)
		}
	}
	if _, _, err := f.m.NodeLine(context.Background(), f.tenant, f.chat, -1, 0); err == nil {
		t.Error("a negative level was read")
	}
}

// TestToolDefinitionsAreValidJSONSchemas checks what providers require of
// a tool definition: a name of [a-zA-Z0-9_-]{1,64}, a description, and
// parameters that are an object schema whose required names are among
// its properties, each property typed and described.
func TestToolDefinitionsAreValidJSONSchemas(t *testing.T) {
	name := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for want, on := range []Settings{2: {}, 3: {Search: true}, 4: AllOn} {
		if want < 2 {
			continue
		}
		b, err := json.Marshal(Tools(on))
		if err != nil {
			t.Fatal(err)
		}
		var tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Parameters  struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				} `json:"properties"`
				Required             []string `json:"required"`
				AdditionalProperties *bool    `json:"additionalProperties"`
			} `json:"parameters"`
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&tools); err != nil {
			t.Fatal(err)
		}
		if len(tools) != want {
			t.Fatalf("%+v: %d tools, want %d", on, len(tools), want)
		}
		for _, tool := range tools {
			p := tool.Parameters
			if !name.MatchString(tool.Name) || tool.Description == "" || p.Type != "object" || len(p.Properties) == 0 ||
				p.AdditionalProperties == nil || *p.AdditionalProperties {
				t.Errorf("tool %q: %+v", tool.Name, tool)
			}
			for _, r := range p.Required {
				if _, ok := p.Properties[r]; !ok {
					t.Errorf("tool %s requires %q, which it does not define", tool.Name, r)
				}
			}
			for prop, s := range p.Properties {
				if (s.Type != "integer" && s.Type != "string" && s.Type != "array") || s.Description == "" {
					t.Errorf("tool %s: property %s is %+v", tool.Name, prop, s)
				}
			}
		}
	}
}
