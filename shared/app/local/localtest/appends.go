package localtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The largest appends a client can send: one user message of text filling
// most of a 10 MB body, through POST /v1/chats/{chat}/messages or the MCP
// endpoint's log tool. Their bodies are streamed (Body.Reader), so a test
// sending several at once holds none of them.

// TextFill is the text of a large append's message: words and spaces,
// nothing JSON escapes.
const TextFill = "the quick brown fox jumps over the lazy dog "

// Body is a JSON request body of known length, made as it is read.
type Body struct {
	head, tail string
	text       int // bytes of TextFill repeated between head and tail
}

// Len is the body's length in bytes.
func (b Body) Len() int64 { return int64(len(b.head) + b.text + len(b.tail)) }

// Reader reads the body from its start.
func (b Body) Reader() io.Reader {
	return io.MultiReader(strings.NewReader(b.head), io.LimitReader(repeated(TextFill), int64(b.text)), strings.NewReader(b.tail))
}

// Bytes is the whole body.
func (b Body) Bytes() []byte {
	data, _ := io.ReadAll(b.Reader())
	return data
}

// TextAppend is the body of POST /v1/chats/{chat}/messages logging one user
// message of text bytes of text under receipt.
func TextAppend(receipt string, text int) Body {
	return Body{head: `{"receipt":` + strconv.Quote(receipt) + `,"messages":[{"role":"user","content":"`, text: text, tail: `"}]}`}
}

// MCPLogCall is the body of a tools/call of the log tool (request id)
// logging the same message to chat.
func MCPLogCall(id int, chat, receipt string, text int) Body {
	return Body{
		head: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"log","arguments":{"chat":%q,"receipt":%q,"messages":[{"role":"user","content":"`, id, chat, receipt),
		text: text,
		tail: `"}]}}}`,
	}
}

// Post sends body to url with the bearer token and the MCP session id
// (each only when not empty) and returns the status and the answer.
func Post(ctx context.Context, url, token, session string, body Body) (int, []byte, error) {
	status, _, out, err := post(ctx, url, token, session, body)
	return status, out, err
}

// PostRetrying is Post, sent again a second later while the answer is a
// 503 with Retry-After, as a client would (sooner than it says: a test has
// no time to spare), at most retries times. It reports how often it did.
func PostRetrying(ctx context.Context, url, token, session string, body Body, retries int) (status int, out []byte, retried int, err error) {
	for {
		var h http.Header
		status, h, out, err = post(ctx, url, token, session, body)
		if err != nil || status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || retried == retries {
			return status, out, retried, err
		}
		retried++
		select {
		case <-ctx.Done():
			return status, out, retried, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func post(ctx context.Context, url, token, session string, body Body) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body.Reader())
	if err != nil {
		return 0, nil, nil, err
	}
	req.ContentLength = body.Len()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, out, err
}

// MCPSession opens a session of the MCP endpoint at url (initialize, then
// its notification) with the bearer token ("" for none) and returns its id.
func MCPSession(ctx context.Context, url, token string) (string, error) {
	init := Body{head: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"localtest","version":"1"}}}`}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, init.Reader())
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	id := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || id == "" {
		return "", fmt.Errorf("localtest: initialize: %d, session %q: %.300s", res.StatusCode, id, out)
	}
	note := Body{head: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}
	status, out, err := Post(ctx, url, token, id, note)
	if err != nil {
		return "", err
	}
	if status != http.StatusAccepted && status != http.StatusOK {
		return "", fmt.Errorf("localtest: notifications/initialized: %d: %.300s", status, out)
	}
	return id, nil
}

// repeated reads s over and over.
type repeated string

func (r repeated) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r)
	}
	return n, nil
}

// MCPLogged reports whether an MCP answer (JSON or an event stream) is a
// log tool's result that logged: ids, and no error.
func MCPLogged(answer []byte) bool {
	return bytes.Contains(answer, []byte(`"ids":[`)) && !bytes.Contains(answer, []byte(`"isError":true`))
}
