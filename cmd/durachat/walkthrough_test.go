package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/model/offline"
)

// The README's "Using the API" walkthrough, played against the local server
// as a newcomer would play it with curl: the rule that a newcomer
// can log 50 messages, read a view of the offline compactor's lines, and
// zoom to an original.

// walkClient bounds every call; a view wait answers within about 20 s.
var walkClient = &http.Client{Timeout: 40 * time.Second}

// walkBlock is a content block of a tool result as the server answers it.
type walkBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	Name     string `json:"name,omitempty"`
}

type walkToolResult struct {
	Content []walkBlock `json:"content"`
	IsError bool        `json:"isError"`
}

// viewLine is one "<start>+<count>|<line>" of a view.
type viewLine struct {
	Start, Count int64
	Line         string
}

// call sends body (nil for none) as JSON, requires a 200 and decodes the
// answer into out; it returns the answer's raw bytes.
func call(t *testing.T, method, url string, body, out any) []byte {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := walkClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: answer %s is not the documented shape: %v", method, url, raw, err)
		}
	}
	return raw
}

// builtView reads GET .../view?wait=turn until every line is built, and
// returns the answer and its lines, which must cover entries entries.
func builtView(t *testing.T, chatURL string, entries int64) ([]byte, wire.View, []viewLine) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v wire.View
		raw := call(t, http.MethodGet, chatURL+"/view?wait=turn", nil, &v)
		lines := parseView(t, v.View)
		var covered int64
		for _, l := range lines {
			covered += l.Count
		}
		switch {
		case covered != entries:
			// Appends are durable and seen by the next read once answered.
			t.Fatalf("the view covers %d entries, want %d", covered, entries)
		case v.Stalled:
			t.Fatalf("the view stalled: %s", v.LastError)
		case v.Unbuilt == 0:
			return raw, v, lines
		case time.Now().After(deadline):
			t.Fatalf("%d lines still unbuilt after 30 s", v.Unbuilt)
		}
	}
}

// parseView splits a view into its lines and checks they tile the log
// from entry 0 in aligned blocks.
func parseView(t *testing.T, view string) []viewLine {
	t.Helper()
	body, ok := strings.CutPrefix(view, "<chat>\n")
	if ok {
		body, ok = strings.CutSuffix(body, "</chat>")
	}
	if !ok {
		t.Fatalf("view %q is not wrapped in <chat> ... </chat>", view)
	}
	var out []viewLine
	var next int64
	for _, s := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		if s == "" {
			continue
		}
		label, line, ok := strings.Cut(s, "|")
		start, count, ok2 := strings.Cut(label, "+")
		a, err1 := strconv.ParseInt(start, 10, 64)
		n, err2 := strconv.ParseInt(count, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			t.Fatalf("view line %q does not start with <start>+<count>|", s)
		}
		if a != next || n < 1 || n&(n-1) != 0 || a%n != 0 {
			t.Fatalf("view line %q: want an aligned block starting at entry %d", s, next)
		}
		next = a + n
		out = append(out, viewLine{Start: a, Count: n, Line: line})
	}
	return out
}

// zoom posts args to the zoom tool and returns the raw answer and the result.
func zoom(t *testing.T, chatURL string, args map[string]any) ([]byte, walkToolResult) {
	t.Helper()
	var res walkToolResult
	raw := call(t, http.MethodPost, chatURL+"/tools/zoom", args, &res)
	if res.IsError || len(res.Content) == 0 || res.Content[0].Type != "text" {
		t.Fatalf("zoom %v: %s", args, raw)
	}
	return raw, res
}

// newcomerMessage is message i: over 512 bytes, so the compactor writes its
// line, with a line break and non-ASCII text a word-for-word zoom must keep.
func newcomerMessage(i int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Message %d about the login page.\n", i)
	for k := 0; sb.Len() <= 700; k++ {
		fmt.Fprintf(&sb, "Step %d.%d: the café form posts to /login and answers 502 — retry %d.  ", i, k, k)
	}
	return sb.String()
}

func TestNewcomerLogsFiftyMessagesReadsSummariesAndZoomsToAnOriginal(t *testing.T) {
	const messages = 50
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()}
	base, stop := start(t, env)
	chatURL := base + "/v1/chats/demo"

	// 1. Log each message, one turn at a time, each with its receipt.
	originals := make([]string, messages)
	for i := range messages {
		originals[i] = newcomerMessage(i)
		msg := map[string]any{"role": "user", "content": originals[i]}
		if i%2 == 1 {
			msg = map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": originals[i]}}}
		}
		var got struct{ IDs []int64 }
		call(t, http.MethodPost, chatURL+"/messages", map[string]any{"receipt": fmt.Sprintf("turn-%d", i), "messages": []any{msg}}, &got)
		if !slices.Equal(got.IDs, []int64{int64(i)}) {
			t.Fatalf("message %d logged as %v", i, got.IDs)
		}
	}

	// 2. The view: every line the offline compactor's, labelled as no
	// model's summary, within 512 bytes, one line per message or fewer.
	_, v, lines := builtView(t, chatURL, messages)
	if v.Lines != int64(len(lines)) || len(lines) > messages || v.Unbuilt != 0 {
		t.Fatalf("view: lines %d (parsed %d), unbuilt %d; want at most %d lines, all built", v.Lines, len(lines), v.Unbuilt, messages)
	}
	t.Logf("view of %d messages: %d lines, %d bytes; line 0: %q", messages, v.Lines, v.Bytes, lines[0].Line)
	byStart := map[int64]string{}
	for _, l := range lines {
		if !strings.HasPrefix(l.Line, offline.Marker+" ") || len(l.Line) > offline.Limit {
			t.Fatalf("view line %d+%d is not an offline extract of at most %d bytes: %q", l.Start, l.Count, offline.Limit, l.Line)
		}
		if l.Count == 1 {
			byStart[l.Start] = l.Line
		}
	}

	// The tools: zoom and date, each with a JSON Schema that accepts the
	// arguments this walkthrough sends.
	var tools struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	call(t, http.MethodGet, chatURL+"/tools", nil, &tools)
	schemas := map[string]*jsonschema.Schema{}
	for _, tool := range tools.Tools {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tool.Parameters))
		if err != nil {
			t.Fatalf("tool %s: parameters: %v", tool.Name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(tool.Name+".json", doc); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile(tool.Name + ".json")
		if err != nil {
			t.Fatalf("tool %s: parameters are not a JSON Schema: %v", tool.Name, err)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		schemas[tool.Name] = s
	}
	if schemas["zoom"] == nil || schemas["date"] == nil {
		t.Fatalf("tools %+v: want zoom and date", tools.Tools)
	}
	for _, c := range []struct {
		args string
		ok   bool
	}{{`{"id": 0, "n": 1}`, true}, {`{"id": 0, "n": 2}`, true}, {`{"n": 1}`, false}, {`{"id": 0, "zoomLevel": 1}`, false}} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(c.args))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas["zoom"].Validate(doc); (err == nil) != c.ok {
			t.Errorf("zoom's schema on %s: valid = %v, want %v (%v)", c.args, err == nil, c.ok, err)
		}
	}

	// Zoom n=1 opens an original word for word; n=2 its two child lines.
	_, res := zoom(t, chatURL, map[string]any{"id": 0, "n": 1})
	if want := "user: " + originals[0]; res.Content[0].Text != want || len(res.Content) != 1 {
		t.Fatalf("zoom id=0 n=1:\n got %q\nwant %q", res.Content[0].Text, want)
	}
	_, res = zoom(t, chatURL, map[string]any{"id": messages - 1, "n": 1})
	if want := "talk: " + originals[messages-1]; res.Content[0].Text != want {
		t.Fatalf("zoom id=%d n=1:\n got %q\nwant %q", messages-1, res.Content[0].Text, want)
	}
	_, res = zoom(t, chatURL, map[string]any{"id": 0, "n": 2})
	children := strings.SplitN(res.Content[0].Text, "\n", 3)
	if len(children) != 3 {
		t.Fatalf("zoom id=0 n=2: %q, want two child lines", res.Content[0].Text)
	}
	for k, c := range children[:2] {
		line, ok := strings.CutPrefix(c, fmt.Sprintf("%d+1|", k))
		if !ok || !strings.HasPrefix(line, offline.Marker+" ") {
			t.Fatalf("zoom id=0 n=2: child %d is %q, want %d+1|%s ...", k, c, k, offline.Marker)
		}
		if inView, ok := byStart[int64(k)]; ok && inView != line {
			t.Errorf("zoom id=0 n=2: child %d is %q, the view has %q", k, line, inView)
		}
	}

	// 3. A tool result through after-tool: its image becomes a ref.
	b64 := pngB64(t)
	var after struct {
		Result struct {
			Content []json.RawMessage `json:"content"`
		} `json:"result"`
		Stored []string `json:"stored"`
	}
	call(t, http.MethodPost, chatURL+"/hooks/after-tool", map[string]any{
		"call": map[string]any{"id": "c1", "name": "screenshot"},
		"result": map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "Captured the login page."},
			map[string]any{"type": "image", "data": b64, "mimeType": "image/png"},
		}},
	}, &after)
	if len(after.Stored) != 1 || len(after.Result.Content) != 2 {
		t.Fatalf("after-tool: stored %v, content %d blocks", after.Stored, len(after.Result.Content))
	}
	name := after.Stored[0]
	ref := "[image " + name + "]"
	var refBlock walkBlock
	if err := json.Unmarshal(after.Result.Content[1], &refBlock); err != nil || refBlock != (walkBlock{Type: "text", Text: ref}) {
		t.Fatalf("after-tool: the image block became %s, want the text %q", after.Result.Content[1], ref)
	}

	// The assistant's call and that result, logged like any message.
	var got struct{ IDs []int64 }
	call(t, http.MethodPost, chatURL+"/messages", map[string]any{"receipt": "turn-50-tool", "messages": []any{
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": "c1", "name": "screenshot", "arguments": map[string]any{}}}},
		map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "screenshot", "content": after.Result.Content, "isError": false},
	}}, &got)
	if !slices.Equal(got.IDs, []int64{messages, messages + 1}) {
		t.Fatalf("tool call and result logged as %v", got.IDs)
	}
	// The entry holds the ref, not the image; zoom carries the image back.
	resultID := got.IDs[1]
	_, res = zoom(t, chatURL, map[string]any{"id": resultID, "n": 1})
	if want := "echo: screenshot: Captured the login page.\n" + ref; res.Content[0].Text != want {
		t.Fatalf("zoom id=%d n=1: %q, want %q", resultID, res.Content[0].Text, want)
	}
	if want := (walkBlock{Type: "image", Data: b64, MimeType: "image/png", Name: name}); len(res.Content) != 2 || res.Content[1] != want {
		t.Fatalf("zoom id=%d n=1: content %+v, want the text and the image %s", resultID, res.Content, name)
	}

	// 4. before-request in anthropic format restores the exact ref block
	// and leaves text that mentions it alone.
	mention := "what is in " + ref + "?"
	var restored struct {
		Request struct {
			Messages []struct {
				Content []json.RawMessage `json:"content"`
			} `json:"messages"`
		} `json:"request"`
		Restored   []string          `json:"restored"`
		Unrestored []json.RawMessage `json:"unrestored"`
	}
	call(t, http.MethodPost, chatURL+"/hooks/before-request", map[string]any{
		"format": "anthropic",
		"request": map[string]any{"model": "claude-x", "max_tokens": 1024, "messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": ref},
				map[string]any{"type": "text", "text": mention},
			}},
		}},
	}, &restored)
	if !slices.Equal(restored.Restored, []string{name}) || len(restored.Unrestored) != 0 || len(restored.Request.Messages) != 1 {
		t.Fatalf("before-request: restored %v, unrestored %s", restored.Restored, restored.Unrestored)
	}
	blocks := restored.Request.Messages[0].Content
	var image struct {
		Type   string `json:"type"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	var text walkBlock
	if len(blocks) != 2 || json.Unmarshal(blocks[0], &image) != nil || json.Unmarshal(blocks[1], &text) != nil {
		t.Fatalf("before-request: content %s", blocks)
	}
	if image.Type != "image" || image.Source.Type != "base64" || image.Source.MediaType != "image/png" || image.Source.Data != b64 {
		t.Errorf("before-request: first block %s, want the PNG as an anthropic base64 image", blocks[0])
	}
	if text != (walkBlock{Type: "text", Text: mention}) {
		t.Errorf("before-request: second block %s, want the text left alone", blocks[1])
	}

	// The images route answers the stored bytes.
	resp, err := walkClient.Get(chatURL + "/images/" + name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString(b64)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(data, want) {
		t.Fatalf("GET images/%s: %d %s, %d bytes; want the %d PNG bytes", name, resp.StatusCode, resp.Header.Get("Content-Type"), len(data), len(want))
	}

	// 5. The data survives a restart: the same view and the same zooms.
	asked := []map[string]any{{"id": 0, "n": 1}, {"id": 0, "n": 2}, {"id": resultID, "n": 1}}
	viewBefore, _, _ := builtView(t, chatURL, messages+2)
	var zoomsBefore [][]byte
	for _, a := range asked {
		raw, _ := zoom(t, chatURL, a)
		zoomsBefore = append(zoomsBefore, raw)
	}
	if err := stop(); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}

	base, _ = start(t, env)
	chatURL = base + "/v1/chats/demo"
	if viewAfter, _, _ := builtView(t, chatURL, messages+2); !bytes.Equal(viewAfter, viewBefore) {
		t.Errorf("view after the restart:\n%s\nbefore:\n%s", viewAfter, viewBefore)
	}
	for k, a := range asked {
		if raw, _ := zoom(t, chatURL, a); !bytes.Equal(raw, zoomsBefore[k]) {
			t.Errorf("zoom %v after the restart:\n%s\nbefore:\n%s", a, raw, zoomsBefore[k])
		}
	}
}
