package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// stdioHost is a host on the other end of a LineTransport: it writes lines
// and reads the server's, one at a time.
type stdioHost struct {
	t   *testing.T
	ctx context.Context
	in  *io.PipeWriter
	out chan string
}

func startStdio(t *testing.T, maxLine int) *stdioHost {
	t.Helper()
	// A bound only a hang reaches.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := NewServer(fakeMemory{}, Options{Chat: "c"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, &LineTransport{In: inR, Out: outW, MaxLine: maxLine})
		_ = outW.Close()
	}()
	t.Cleanup(func() { _ = inW.Close(); <-done })
	out := make(chan string)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return &stdioHost{t: t, ctx: ctx, in: inW, out: out}
}

func (h *stdioHost) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("the server no longer reads: %v", err)
	}
}

func (h *stdioHost) answer() string {
	h.t.Helper()
	select {
	case l, ok := <-h.out:
		if !ok {
			h.t.Fatal("the server ended its output")
		}
		return l
	case <-h.ctx.Done():
		h.t.Fatal("no answer")
	}
	return ""
}

type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Each line that is not a message the server takes is answered with a
// JSON-RPC error, its id the line's when it names one (else null), and the
// session answers the request on the next line: no bad line ends it.
func TestEachBadLineOnStdioIsAnsweredAndTheNextRequestServed(t *testing.T) {
	const maxLine = 300_000
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	deepObject := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	for _, c := range []struct {
		name, line string
		code       int64  // 0: no answer
		id         string // the answer's id
		batch      bool   // answered with an array
	}{
		{"a cut object", "{", -32700, "null", false},
		{"text", "hello", -32700, "null", false},
		{"two values", `{} {}`, -32700, "null", false},
		{"an empty batch", "[]", -32600, "null", false},
		{"null", "null", -32600, "null", false},
		{"a number", "42", -32600, "null", false},
		{"a batch of one", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, -32600, "7", true},
		{"a batch of a notification", `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`, 0, "", false},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, -32600, "null", false},
		{"an array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, -32600, "null", false},
		{"JSON-RPC 1.0", `{"jsonrpc":"1.0","id":10,"method":"ping"}`, -32600, "10", false},
		{"no method and no id", `{"jsonrpc":"2.0"}`, -32600, "null", false},
		{"100,000 arrays deep", deep, -32700, "null", false},
		{"objects past the depth in params", `{"jsonrpc":"2.0","id":11,"method":"ping","params":` + deepObject + `}`, -32700, "null", false},
		{"a line over the limit", `{"jsonrpc":"2.0","id":12,"method":"ping","params":{"pad":"` + strings.Repeat("x", maxLine) + `"}}`, -32600, "null", false},
		{"a response to nothing", `{"jsonrpc":"2.0","id":99,"result":{}}`, 0, "", false},
		{"an unknown method", `{"jsonrpc":"2.0","id":13,"method":"no/such"}`, -32601, "13", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startStdio(t, maxLine)
			h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if a := h.answer(); !strings.Contains(a, `"id":1,"result"`) {
				t.Fatalf("initialize: %s", a)
			}
			h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			h.send(c.line)
			if c.code != 0 {
				raw := h.answer()
				var a rpcAnswer
				if c.batch {
					var as []rpcAnswer
					if err := json.Unmarshal([]byte(raw), &as); err != nil || len(as) != 1 {
						t.Fatalf("answer %s, want an array of one error", raw)
					}
					a = as[0]
				} else if err := json.Unmarshal([]byte(raw), &a); err != nil {
					t.Fatalf("answer %s: %v", raw, err)
				}
				if a.Error == nil || a.Error.Code != c.code || a.Error.Message == "" || string(a.ID) != c.id {
					t.Fatalf("answer %s, want error %d with id %s", raw, c.code, c.id)
				}
			}
			h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			var a rpcAnswer
			if raw := h.answer(); json.Unmarshal([]byte(raw), &a) != nil || string(a.ID) != "2" || a.Result == nil {
				t.Fatalf("the request after the bad line: %s, want its result", raw)
			}
		})
	}
}
