package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxPayload is Lambda's limit on a synchronous invocation's request and
// response: 6 MB each.
const MaxPayload = 6 * 1024 * 1024

// Invocation errors, as Lambda reports them.
var (
	// ErrRequestTooLarge: the event is over MaxPayload; the function did
	// not run.
	ErrRequestTooLarge = errors.New("RequestEntityTooLargeException: the request payload is over 6 MB")
	// ErrResponseTooLarge: the function ran, its answer is over MaxPayload.
	ErrResponseTooLarge = errors.New("the response payload is over 6 MB")
	// ErrTimedOut: the function ran past its timeout.
	ErrTimedOut = errors.New("the function timed out")
	// ErrFunction: the function returned an error or its process failed.
	ErrFunction = errors.New("the function failed")
)

// Function runs one function's bootstrap under the Runtime Interface
// Emulator, as Lambda runs it: each execution environment (an emulator
// with its own function process) takes one invocation at a time, more are
// started as invocations overlap, up to Max (and while Pool has room), and
// one that failed or timed out is discarded.
type Function struct {
	Def       FunctionDef
	Bootstrap string   // path of the built bootstrap
	RIE       string   // path of aws-lambda-rie
	Env       []string // the function's environment
	Max       int      // concurrent execution environments
	// Pool, when set, is the account's unreserved concurrency, which the
	// functions without a reservation share: an invocation also takes a
	// place in it. A function with a reservation has none.
	Pool *Pool
	Logs io.Writer
	// Ports, when set, hands out the emulators' ports (a stack's functions
	// share one); DefaultPorts otherwise.
	Ports *Ports

	once     sync.Once
	slots    chan struct{}
	mu       sync.Mutex
	idle     []*instance
	live     map[*instance]bool
	closed   bool
	n        atomic.Int64
	starts   atomic.Int64
	invoking atomic.Int64
	// Totals of Usage.
	invocations, ran, waited atomic.Int64
	// spread: invocations go to the environment idle longest (Spread).
	spread bool
}

// Pool is concurrency that several functions share: the account's
// unreserved concurrency of a Region.
type Pool struct{ places chan struct{} }

// NewPool returns a pool of n concurrent invocations.
func NewPool(n int) *Pool { return &Pool{places: make(chan struct{}, max(n, 1))} }

// Size is how many invocations the pool lets run at once.
func (p *Pool) Size() int { return cap(p.places) }

type instance struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (f *Function) init() {
	f.once.Do(func() {
		f.slots = make(chan struct{}, max(f.Max, 1))
		f.live = map[*instance]bool{}
		if f.Ports == nil {
			f.Ports = DefaultPorts()
		}
	})
}

// ColdStarts is how many execution environments have been started.
func (f *Function) ColdStarts() int64 { return f.starts.Load() }

// Usage is what a function has run so far.
type Usage struct {
	Invocations int64
	// Duration is the invocations' time in an execution environment,
	// what Lambda bills (before its rounding to the millisecond), cold
	// starts included.
	Duration time.Duration
	// Waited is the invocations' time waiting for an execution
	// environment to be free, where Lambda would have throttled them.
	Waited     time.Duration
	ColdStarts int64
}

// Usage returns the function's totals so far.
func (f *Function) Usage() Usage {
	return Usage{Invocations: f.invocations.Load(), Duration: time.Duration(f.ran.Load()),
		Waited: time.Duration(f.waited.Load()), ColdStarts: f.starts.Load()}
}

// Invoke runs the function on payload and returns its answer. ctx bounds
// the wait for an environment and the call (an integration's timeout).
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.init()
	if len(payload) > MaxPayload {
		return nil, ErrRequestTooLarge
	}
	asked := time.Now()
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		f.waited.Add(int64(time.Since(asked)))
		return nil, fmt.Errorf("%s: waiting for an execution environment: %w", f.Def.Name, ctx.Err())
	}
	defer func() { <-f.slots }()
	if f.Pool != nil {
		select {
		case f.Pool.places <- struct{}{}:
		case <-ctx.Done():
			f.waited.Add(int64(time.Since(asked)))
			return nil, fmt.Errorf("%s: waiting for the account's unreserved concurrency: %w", f.Def.Name, ctx.Err())
		}
		defer func() { <-f.Pool.places }()
	}
	began := time.Now()
	f.waited.Add(int64(began.Sub(asked)))
	f.invocations.Add(1)
	defer func() { f.ran.Add(int64(time.Since(began))) }()
	in, err := f.take()
	if err != nil {
		return nil, err
	}
	f.invoking.Add(1)
	defer f.invoking.Add(-1)
	out, healthy, err := f.call(ctx, in, payload)
	if healthy {
		f.put(in)
	} else {
		f.discard(in)
	}
	if err != nil {
		return nil, err
	}
	if len(out) > MaxPayload {
		return nil, ErrResponseTooLarge
	}
	return out, nil
}

// call invokes in; healthy tells whether in can take another invocation
// (a function's error leaves it so; a timeout or a failed process not).
func (f *Function) call(ctx context.Context, in *instance, payload []byte) (out []byte, healthy bool, err error) {
	// The emulator enforces the function's own timeout; this one only
	// guards against an emulator that never answers.
	cctx, cancel := context.WithTimeout(ctx, time.Duration(f.Def.Timeout)*time.Second+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, in.url, bytes.NewReader(payload))
	if err != nil {
		return nil, false, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("%s: %w", f.Def.Name, ctx.Err())
		}
		return nil, false, fmt.Errorf("%w: %s: %v", ErrFunction, f.Def.Name, err)
	}
	defer res.Body.Close()
	out, err = io.ReadAll(io.LimitReader(res.Body, MaxPayload+1))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: reading the answer: %v", ErrFunction, f.Def.Name, err)
	}
	switch {
	case res.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("%w: %s: the emulator answered %s: %s", ErrFunction, f.Def.Name, res.Status, bytes.TrimSpace(out))
	case bytes.HasPrefix(out, []byte("Task timed out")):
		return nil, false, fmt.Errorf("%w: %s after %d s", ErrTimedOut, f.Def.Name, f.Def.Timeout)
	}
	if fe, ok := asFunctionError(out); ok {
		return nil, true, fmt.Errorf("%w: %s: %s: %s", ErrFunction, f.Def.Name, fe.ErrorType, fe.ErrorMessage)
	}
	return out, true, nil
}

// take returns an idle environment or starts one (a cold start).
func (f *Function) take() (*instance, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, fmt.Errorf("%s: the stack is closed", f.Def.Name)
	}
	if n := len(f.idle); n > 0 {
		var in *instance
		if f.spread {
			in, f.idle = f.idle[0], f.idle[1:]
		} else {
			in, f.idle = f.idle[n-1], f.idle[:n-1]
		}
		f.mu.Unlock()
		return in, nil
	}
	f.mu.Unlock()
	return f.start()
}

func (f *Function) put(in *instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || !f.live[in] {
		return
	}
	f.idle = append(f.idle, in)
}

func (f *Function) discard(in *instance) {
	f.mu.Lock()
	delete(f.live, in)
	f.mu.Unlock()
	in.stop()
}

// Spread starts execution environments until n are up (at most Max), as
// provisioned concurrency would, and from then on hands each invocation
// to the environment idle longest, so invocations in a row reach every
// environment in turn: a test can ask each process of a function (each
// with its own caches). Lambda promises no order; without Spread an
// invocation takes the environment idle least long.
func (f *Function) Spread(n int) error {
	f.init()
	f.mu.Lock()
	f.spread = true
	live := len(f.live)
	f.mu.Unlock()
	for ; live < min(n, max(f.Max, 1)); live++ {
		in, err := f.start()
		if err != nil {
			return err
		}
		f.put(in)
	}
	return nil
}

// Kill stops every execution environment at once, as a crash of the
// function's sandboxes would: invocations in flight fail.
func (f *Function) Kill() int {
	f.init()
	f.mu.Lock()
	all := make([]*instance, 0, len(f.live))
	for in := range f.live {
		all = append(all, in)
	}
	f.live = map[*instance]bool{}
	f.idle = nil
	f.mu.Unlock()
	for _, in := range all {
		in.stop()
	}
	return len(all)
}

// Emulators returns the process ids of the live execution environments'
// emulators; each runs the function's process as its child.
func (f *Function) Emulators() []int {
	f.init()
	f.mu.Lock()
	defer f.mu.Unlock()
	pids := make([]int, 0, len(f.live))
	for in := range f.live {
		if in.cmd.Process != nil {
			pids = append(pids, in.cmd.Process.Pid)
		}
	}
	return pids
}

// Busy is how many invocations are running.
func (f *Function) Busy() int64 { return f.invoking.Load() }

// Close stops every environment; Invoke fails afterwards.
func (f *Function) Close() {
	f.init()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.Kill()
}

func (in *instance) stop() {
	if in.cmd.Process != nil {
		_ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-in.done
}

// start runs a new emulator with the bootstrap on free loopback ports and
// waits until it accepts invocations. An emulator that exits before it
// listens (a port taken meanwhile by a program outside the stack) is
// started again on other ports.
func (f *Function) start() (*instance, error) {
	for attempt := 1; ; attempt++ {
		in, err := f.startOnce()
		if err == nil || !errors.Is(err, errExitedEarly) || attempt == 3 {
			return in, err
		}
	}
}

// errExitedEarly: the emulator's process ended before it listened.
var errExitedEarly = errors.New("the process exited before listening")

func (f *Function) startOnce() (*instance, error) {
	n := f.n.Add(1)
	invokeAddr, err := f.Ports.Take()
	if err != nil {
		return nil, err
	}
	runtimeAddr, err := f.Ports.Take()
	if err != nil {
		f.Ports.Release(invokeAddr)
		return nil, err
	}
	dir := filepath.Dir(f.Bootstrap)
	cmd := exec.Command(f.RIE,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		f.Bootstrap)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"AWS_LAMBDA_FUNCTION_NAME=" + f.Def.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(f.Def.Timeout),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(f.Def.MemoryMB),
	}, f.Env...)
	w := &prefixWriter{prefix: fmt.Sprintf("[%s#%d] ", f.Def.Name, n), w: f.Logs}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = environmentAttr()
	if err := cmd.Start(); err != nil {
		f.Ports.Release(invokeAddr)
		f.Ports.Release(runtimeAddr)
		return nil, fmt.Errorf("%s: starting the emulator: %w", f.Def.Name, err)
	}
	in := &instance{url: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations", cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		w.Flush()
		f.Ports.Release(invokeAddr)
		f.Ports.Release(runtimeAddr)
		close(in.done)
	}()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		in.stop()
		return nil, fmt.Errorf("%s: the stack is closed", f.Def.Name)
	}
	f.live[in] = true
	f.mu.Unlock()
	f.starts.Add(1)
	if err := awaitListen(invokeAddr, in.done, 15*time.Second); err != nil {
		f.discard(in)
		return nil, fmt.Errorf("%s: %w", f.Def.Name, err)
	}
	return in, nil
}

// awaitListen waits until addr accepts connections, the process ends
// (done) or the time is up.
func awaitListen(addr string, done <-chan struct{}, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%w on %s", errExitedEarly, addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s", addr, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// functionError is the payload of a function's error.
type functionError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// asFunctionError tells a function's error payload from its answer. An
// error payload names errorType, so an answer that does not is not parsed
// here: an answer of images is megabytes, and each pass of encoding/json
// over it takes milliseconds.
func asFunctionError(out []byte) (functionError, bool) {
	if !bytes.Contains(out, []byte(`"errorType"`)) {
		return functionError{}, false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(out, &probe) != nil {
		return functionError{}, false
	}
	_, hasType := probe["errorType"]
	_, hasStatus := probe["statusCode"]
	if !hasType || hasStatus {
		return functionError{}, false
	}
	var fe functionError
	json.Unmarshal(out, &fe)
	return fe, true
}

// prefixWriter writes whole lines to w, each with prefix.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if p.w == nil {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		p.w.Write(line)
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) > 64<<10 {
		p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
	return len(b), nil
}

// Flush writes what is left of an unfinished line.
func (p *prefixWriter) Flush() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
}
