package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxDepth is how deeply a message on a LineTransport may nest its arrays
// and objects: the depth the SDK decodes.
const MaxDepth = 1000

// LineTransport is MCP's stdio transport: one JSON-RPC message a line on
// In, each answer a line on Out. A line that is not a message the server
// takes is answered with a JSON-RPC error and the session goes on with the
// next line: -32700 (parse error) for a line that is not one JSON value or
// that nests deeper than MaxDepth, -32600 (invalid request) for a value
// that is not a JSON-RPC 2.0 message, for a line over MaxLine bytes (read
// to its end, never held whole), and for a batch (MCP dropped batches in
// 2025-06-18): each request of a batch is answered with its own id. The
// error's id is the line's when it names a valid one, else null.
type LineTransport struct {
	In  io.ReadCloser
	Out io.Writer
	// MaxLine bounds a line's bytes; 0 is api.MaxBody, as over HTTP.
	MaxLine int
}

// Connect implements sdk.Transport: it starts reading In.
func (t *LineTransport) Connect(context.Context) (sdk.Connection, error) {
	limit := t.MaxLine
	if limit <= 0 {
		limit = api.MaxBody
	}
	lines := make(chan line)
	c := &lineConn{in: t.In, out: t.Out, limit: limit, lines: lines, closed: make(chan struct{})}
	// Reads run apart, so that Close ends a Read waiting on In; a read of
	// stdin that Close does not unblock leaves this goroutine to the end of
	// the process.
	go readLines(bufio.NewReaderSize(t.In, 64<<10), limit, lines, c.closed)
	return c, nil
}

// line is one line of input without its end, or the input's end (err).
type line struct {
	b    []byte
	long bool // over the limit: b is nil
	err  error
}

// readLines sends each line of r to lines until r ends or closed is.
func readLines(r *bufio.Reader, limit int, lines chan<- line, closed <-chan struct{}) {
	for {
		b, long, err := readLine(r, limit)
		if len(b) > 0 || long || err == nil {
			select {
			case lines <- line{b: b, long: long}:
			case <-closed:
				return
			}
		}
		if err != nil {
			select {
			case lines <- line{err: err}:
			case <-closed:
			}
			return
		}
	}
}

// readLine reads r to the next newline or its end. A line over limit bytes
// is read to its end and dropped: long, with b nil.
func readLine(r *bufio.Reader, limit int) (b []byte, long bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if !long {
			if len(b)+len(frag) > limit+2 { // the limit and a "\r\n"
				b, long = nil, true
			} else {
				b = append(b, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(b) > limit {
			b, long = nil, true
		}
		return b, long, err
	}
}

// lineConn is a LineTransport's connection.
type lineConn struct {
	in     io.Closer
	out    io.Writer
	limit  int
	lines  <-chan line
	closed chan struct{}
	once   sync.Once

	mu sync.Mutex // one line written at a time
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var l line
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case l = <-c.lines:
		}
		if l.err != nil {
			return nil, l.err
		}
		msg, refusal := c.parse(l)
		if refusal != nil {
			if err := c.writeLine(refusal); err != nil {
				return nil, err
			}
			continue
		}
		if msg != nil {
			return msg, nil
		}
	}
}

// parse is the message of l, or the refusal to answer it with; neither
// for a blank line, or a batch of notifications alone.
func (c *lineConn) parse(l line) (jsonrpc.Message, []byte) {
	if l.long {
		return nil, refusal(nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("invalid request: a message is at most %d bytes, on one line", c.limit))
	}
	b := bytes.TrimSpace(l.b)
	if len(b) == 0 {
		return nil, nil
	}
	if depth(b) > MaxDepth {
		return nil, refusal(nil, jsonrpc.CodeParseError,
			fmt.Sprintf("parse error: the message nests deeper than %d levels", MaxDepth))
	}
	if !rawjson.Valid(b) {
		return nil, refusal(nil, jsonrpc.CodeParseError, "parse error: the line is not one JSON value")
	}
	if b[0] == '[' {
		return nil, refuseBatch(b)
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, refusal(idOf(b), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message: "+err.Error())
	}
	return msg, nil
}

// refuseBatch answers each request of the batch b with an invalid request
// error of its id, and each item that is no message with one of id null;
// an empty batch is one error, as JSON-RPC has it.
func refuseBatch(b []byte) []byte {
	const why = "invalid request: batches are not taken: send each message on its own line"
	var answers []json.RawMessage
	rawjson.Items(b, func(item rawjson.Value) {
		msg, err := jsonrpc.DecodeMessage(item)
		if req, ok := msg.(*jsonrpc.Request); err == nil && (!ok || !req.IsCall()) {
			return // a notification, or a response: nothing answers it
		}
		answers = append(answers, refusal(idOf(item), jsonrpc.CodeInvalidRequest, why))
	})
	if len(answers) == 0 {
		if bytes.Equal(bytes.TrimSpace(b[1:]), []byte("]")) {
			return refusal(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
		}
		return nil
	}
	out, _ := json.Marshal(answers)
	return out
}

// idOf is the id b names, when it is a JSON-RPC id (a string or a number),
// else nil.
func idOf(b []byte) json.RawMessage {
	fields, ok := rawjson.FieldMap(b)
	if !ok {
		return nil
	}
	id := fields["id"]
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil
	}
	return json.RawMessage(id)
}

// refusal is the JSON-RPC error answer of id (nil: null).
func refusal(id json.RawMessage, code int64, message string) []byte {
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	return out
}

// depth is how deeply b's arrays and objects nest, strings skipped; b need
// not be JSON. It stops counting past MaxDepth.
func depth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, ch := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			if d++; d > deepest {
				if deepest = d; deepest > MaxDepth {
					return deepest
				}
			}
		case ch == '}' || ch == ']':
			d--
		}
	}
	return deepest
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp: encoding a message: %w", err)
	}
	return c.writeLine(b)
}

// writeLine writes b and a newline, whole, between other lines.
func (c *lineConn) writeLine(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.out.Write(append(b, '\n'))
	return err
}

func (c *lineConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.in.Close()
	})
	return err
}

func (c *lineConn) SessionID() string { return "" }
