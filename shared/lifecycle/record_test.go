package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"net/http"
	"strings"
	"testing"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// piTurn is a turn as pi makes its messages (pi-ai's types): a user's
// words and a screenshot, an assistant's thinking with its signature, a
// text with its signature and two tool calls, with api, provider, model,
// usage with cost and stopReason; the tool results, one with details and
// one an error with an image; a failed turn (an error stop, no content);
// and fields of the host's own on messages and blocks. $A and $B are
// replaced by two images' base64.
const piTurn = `[
{"role":"user","content":[{"type":"text","text":"Why does the login page fail?"},{"type":"image","data":"$A","mimeType":"image/png"}],"timestamp":1767225601000,"host":{"session":"s-1","tags":["a","b"]}},
{"role":"assistant","content":[
  {"type":"thinking","thinking":"The screenshot shows a 500. Read the handler first.","thinkingSignature":"EqQBCkgIARABGAIiQL0fXkPq1b2c"},
  {"type":"thinking","thinking":"","thinkingSignature":"redacted-payload-0001","redacted":true},
  {"type":"text","text":"Let me read the handler and its log.","textSignature":"msg_01"},
  {"type":"toolCall","id":"toolu_01A","name":"read","arguments":{"path":"login.go","limit":200},"thoughtSignature":"sig-g"},
  {"type":"toolCall","id":"toolu_01B","name":"bash","arguments":{"command":"tail -n 50 app.log"}}],
 "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1532,"output":211,"cacheRead":1024,"cacheWrite":0,"totalTokens":2767,"cost":{"input":0.004596,"output":0.003165,"cacheRead":0.0003072,"cacheWrite":0,"total":0.0080682}},
 "stopReason":"toolUse","timestamp":1767225602000,"responseId":"msg_abc"},
{"role":"toolResult","toolCallId":"toolu_01A","toolName":"read","content":[{"type":"text","text":"package main\n\nfunc login() error { return errDB }\n"}],"details":{"truncation":{"truncated":false,"totalLines":3},"lines":[1,3]},"isError":false,"timestamp":1767225603000},
{"role":"toolResult","toolCallId":"toolu_01B","toolName":"bash","content":[{"type":"text","text":"exit status 1"},{"type":"image","data":"$B","mimeType":"image/png","cache":"ephemeral"}],"isError":true,"timestamp":1767225604000},
{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","errorMessage":"529 overloaded_error: Overloaded","timestamp":1767225605000},
{"role":"assistant","content":[{"type":"thinking","thinking":"Retrying.","thinkingSignature":"EqQBCkgIARABGAIiQL0"},{"type":"text","text":"The database is down: login returns errDB."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":2000,"output":40,"cacheRead":0,"cacheWrite":0,"totalTokens":2040,"cost":{"input":0.006,"output":0.0006,"cacheRead":0,"cacheWrite":0,"total":0.0066}},"stopReason":"stop","timestamp":1767225606000}
]`

// piTurnMessages is piTurn with its images filled in, one raw message each.
func piTurnMessages(t *testing.T, a, b string) []json.RawMessage {
	t.Helper()
	var msgs []json.RawMessage
	if err := json.Unmarshal([]byte(strings.NewReplacer("$A", a, "$B", b).Replace(piTurn)), &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// asRefs is a message with each image block replaced by its ref block, as
// a read-back without images=inline shows it.
func asRefs(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if content, ok := m["content"].([]any); ok {
		for i, b := range content {
			if blk := b.(map[string]any); blk["type"] == "image" {
				content[i] = map[string]any{"type": "text", "text": refs.Ref(images.Name(blk["data"].(string)))}
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON fails the test unless got and want are the same JSON values,
// message by message.
func sameJSON(t *testing.T, what string, got, want []json.RawMessage) {
	t.Helper()
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = string(got[i])
	}
	for i := range want {
		w[i] = string(want[i])
	}
	if !jsonEqualLines(g, w) {
		t.Fatalf("%s: got %d messages\n%s\nwant %d\n%s", what, len(g), strings.Join(g, "\n"), len(w), strings.Join(w, "\n"))
	}
}

// readBack is every message of the chat as GET .../messages answers, with
// query added to each page's.
func (e *env) readBack(tenant, chat, query string) []json.RawMessage {
	e.t.Helper()
	var out []json.RawMessage
	after := ""
	for range 1000 {
		p := e.messages(tenant, chat, "?limit=3"+query+after)
		for _, m := range p.Messages {
			out = append(out, m.Message)
		}
		if p.Next == "" {
			return out
		}
		after = "&after=" + p.Next
	}
	e.t.Fatal("the read-back did not end")
	return nil
}

// exportedMessages are the messages of an export's lines, in order, and
// the images its image lines carry, by name.
func exportedMessages(t *testing.T, export []byte) ([]json.RawMessage, map[string]string) {
	t.Helper()
	var msgs []json.RawMessage
	imgs := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		var l struct {
			Seq     *int64
			Message json.RawMessage
			Image   *struct{ Name, MimeType, Data string }
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("export line %s: %v", line, err)
		}
		switch {
		case l.Image != nil:
			imgs[l.Image.Name] = l.Image.Data
		case l.Seq != nil:
			msgs = append(msgs, l.Message)
		default:
			t.Fatalf("export line %s is neither a message nor an image", line)
		}
	}
	return msgs, imgs
}

func TestEachLoggedMessageReadsBackAsSentOneForOne(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			a, bb := pngB64(t, color.RGBA{10, 200, 30, 255}), pngB64(t, color.RGBA{250, 40, 1, 255})
			sent := piTurnMessages(t, a, bb)
			// As the pi extension logs them, one append a message, and all
			// in one append into another chat.
			for i, m := range sent {
				e.doOK("alice", "POST", "/v1/chats/turns/messages", map[string]any{"messages": []json.RawMessage{m}, "receipt": fmt.Sprint("r", i)})
			}
			e.doOK("alice", "POST", "/v1/chats/whole/messages", map[string]any{"messages": sent})
			var refsForm []json.RawMessage
			for _, m := range sent {
				refsForm = append(refsForm, asRefs(t, m))
			}
			for _, c := range []string{"turns", "whole"} {
				sameJSON(t, c+": read back", e.readBack("alice", c, ""), refsForm)
				sameJSON(t, c+": read back with images=inline", e.readBack("alice", c, "&images=inline"), sent)
				exported, carried := exportedMessages(t, e.export("alice", c))
				sameJSON(t, c+": export", exported, sent)
				if len(carried) != 0 {
					t.Fatalf("%s: the export carries images on lines of their own %v, though every image came inline", c, carried)
				}
			}
			// Memory still makes its entries of the blocks: 2 of the user's
			// message (its words and the image are one), 3 of the first
			// assistant message, one each of the results, one of the error
			// stop and one of the last answer.
			if l := e.list("alice", ""); l.Chats[0].Messages != 8 {
				t.Fatalf("chat turns holds %d entries, want 8", l.Chats[0].Messages)
			}
			e.rowsHoldNoBase64(a, bb)
		})
	}
}

// doOK sends a request and fails the test unless it answers 200.
func (e *env) doOK(tenant, method, path string, body any) []byte {
	e.t.Helper()
	code, out := e.do(tenant, method, path, body)
	if code != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return out
}

// rowsHoldNoBase64 fails the test when any item of the table holds one of
// the images' base64, or passes the item budget.
func (e *env) rowsHoldNoBase64(b64s ...string) {
	e.t.Helper()
	for _, chat := range []string{"turns", "whole", "big"} {
		for _, it := range e.itemsOf(e.current("alice", chat).PK()) {
			for _, b64 := range b64s {
				if bytes.Contains(it.Body, []byte(b64[:64])) {
					e.t.Fatalf("row %s holds an image's base64", it.SK)
				}
			}
			if it.Size() > store.ItemBudget {
				e.t.Fatalf("row %s is %d bytes, over the budget of %d", it.SK, it.Size(), store.ItemBudget)
			}
		}
	}
}

func TestNoBlockIsInventedAroundRefsOrWhereAMessageIsCut(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			a, bb := pngB64(t, color.RGBA{1, 1, 200, 255}), pngB64(t, color.RGBA{2, 200, 2, 255})
			long := strings.Repeat("word ", transcript.PieceChars/5*2) + "end" // 50,003 characters: three entries
			sent := []json.RawMessage{
				json.RawMessage(`{"role":"user","content":[{"type":"image","data":"` + a + `","mimeType":"image/png"},{"type":"text","text":""},{"type":"image","data":"` + bb + `","mimeType":"image/png"}],"timestamp":1767225601000}`),
				json.RawMessage(`{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"image","data":"` + a + `","mimeType":"image/png"},{"type":"text","text":"after the image"}],"timestamp":1767225602000}`),
				json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"` + long + `"}],"stopReason":"length","timestamp":1767225603000}`),
			}
			ids := e.doOK("alice", "POST", "/v1/chats/cut/messages", map[string]any{"messages": sent})
			var got struct{ IDs []int64 }
			json.Unmarshal(ids, &got)
			if len(got.IDs) < 7 {
				t.Fatalf("ids %v: want the long texts cut into several entries each", got.IDs)
			}
			var refsForm []json.RawMessage
			for _, m := range sent {
				refsForm = append(refsForm, asRefs(t, m))
			}
			back := e.readBack("alice", "cut", "")
			sameJSON(t, "read back", back, refsForm)
			for _, m := range back {
				if bytes.Contains(m, []byte(`{"type":"text"}`)) {
					t.Fatalf("read back a text block without text: %s", m)
				}
			}
			sameJSON(t, "read back with images=inline", e.readBack("alice", "cut", "&images=inline"), sent)
		})
	}
}

func TestAMessageTooBigForItsRowReadsBackWhole(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			// Arguments and details of 600 KB: more than a row holds,
			// in the tool call's entry and in the message's record.
			args := strings.Repeat("x", 600<<10)
			sent := []json.RawMessage{
				json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"write","arguments":{"body":"` + args + `"}}],"stopReason":"toolUse","timestamp":1}`),
				json.RawMessage(`{"role":"toolResult","toolCallId":"c1","toolName":"write","content":[{"type":"text","text":"ok"}],"details":{"echo":"` + args + `"},"isError":false,"timestamp":2}`),
			}
			e.doOK("alice", "POST", "/v1/chats/big/messages", map[string]any{"messages": sent})
			sameJSON(t, "read back", e.readBack("alice", "big", ""), sent)
			e.rowsHoldNoBase64()
		})
	}
}

func TestAnExportOfRefsCarriesTheirImagesAndImportsToTheSameRecord(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			a, bb := pngB64(t, color.RGBA{9, 9, 9, 255}), pngB64(t, color.RGBA{90, 9, 9, 255})
			// An image the host offloaded first, logged as its ref block, and
			// the pi turn with its images inline.
			e.doOK("alice", "POST", "/v1/chats/src/hooks/after-tool", map[string]any{
				"call":   map[string]any{"id": "x", "name": "screenshot"},
				"result": map[string]any{"content": []map[string]any{{"type": "image", "data": a, "mimeType": "image/png"}}}})
			withRef := json.RawMessage(`{"role":"toolResult","toolCallId":"x","toolName":"screenshot","content":[{"type":"text","text":"` + refs.Ref(images.Name(a)) + `"},{"type":"text","text":"` + refs.Ref(images.Name(a)) + `"}],"isError":false,"timestamp":5}`)
			sent := append([]json.RawMessage{withRef}, piTurnMessages(t, a, bb)...)
			e.doOK("alice", "POST", "/v1/chats/src/messages", map[string]any{"messages": sent})
			first := e.export("alice", "src")
			exported, carried := exportedMessages(t, first)
			sameJSON(t, "export", exported, sent)
			if len(carried) != 1 || carried[images.Name(a)] != a {
				t.Fatalf("the export carries images %v, want the ref block's image once", carried)
			}
			// Into another tenant, which holds none of the images.
			r := e.importFile("bob", "copy", first)
			if r.Messages != len(sent) {
				t.Fatalf("import = %+v, want %d messages", r, len(sent))
			}
			sameJSON(t, "the import read back", e.readBack("bob", "copy", ""), e.readBack("alice", "src", ""))
			if again := e.export("bob", "copy"); !bytes.Equal(again, first) {
				t.Fatalf("export of the import differs:\n%.2000s\nwant\n%.2000s", again, first)
			}
		})
	}
}

func TestEntriesWrittenBeforeMessagesWereRecordedReadAsBefore(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			ctx := context.Background()
			a := pngB64(t, color.RGBA{3, 30, 3, 255})
			if _, err := images.New(b.Blobs).Put(ctx, "alice", a); err != nil {
				t.Fatal(err)
			}
			ref := refs.Ref(images.Name(a))
			// Rows as the log wrote them before it kept messages: one append
			// of a user's words around an image, an assistant's text and a
			// tool call.
			rows := []string{
				`{"k":"user","t":"look\n` + ref + `\n","d":1700000000000,"r":"old","n":3}`,
				`{"k":"talk","t":"seen","d":1700000001000,"r":"old","p":1,"n":3}`,
				`{"k":"tool","t":"grep {\"q\":\"x\"}","d":1700000001000,"r":"old","p":2,"n":3}`,
			}
			for i, body := range rows {
				it := store.Item{Key: store.Key{PK: store.ChatPK("alice", "old"), SK: fmt.Sprintf("e/%016d", i)}, Body: []byte(body)}
				if err := b.Table.Create(ctx, it); err != nil {
					t.Fatal(err)
				}
			}
			want := []json.RawMessage{
				json.RawMessage(`{"role":"user","content":[{"type":"text","text":"look"},{"type":"text","text":"` + ref + `"}],"timestamp":1700000000000}`),
				json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"seen"}],"timestamp":1700000001000}`),
				json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","name":"grep","arguments":{"q":"x"}}],"timestamp":1700000001000}`),
			}
			sameJSON(t, "read back", e.readBack("alice", "old", ""), want)
			exported, carried := exportedMessages(t, e.export("alice", "old"))
			sameJSON(t, "export", exported, want)
			if carried[images.Name(a)] != a {
				t.Fatalf("the export carries %v, want the ref's image", carried)
			}
		})
	}
}

// anthropicRequest builds an Anthropic Messages request of read-back pi
// messages, as a host rebuilds a provider conversation from its log:
// pi's failed turns (stopReason error or aborted) are left out, as pi
// leaves them out of a model's context; thinking keeps its signature
// (redacted thinking its payload), tool calls become tool_use blocks with
// their ids, and consecutive tool results one user message of tool_result
// blocks naming them.
func anthropicRequest(t *testing.T, msgs []json.RawMessage) map[string]any {
	t.Helper()
	type block = map[string]any
	var out []map[string]any
	for _, raw := range msgs {
		var m struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"toolCallId"`
			IsError    bool            `json:"isError"`
			StopReason string          `json:"stopReason"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var blocks []map[string]any
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				t.Fatalf("content %s", m.Content)
			}
			blocks = []map[string]any{{"type": "text", "text": s}}
		}
		var content []block
		for _, b := range blocks {
			switch b["type"] {
			case "text":
				content = append(content, block{"type": "text", "text": b["text"]})
			case "thinking":
				if b["redacted"] == true {
					content = append(content, block{"type": "redacted_thinking", "data": b["thinkingSignature"]})
				} else {
					content = append(content, block{"type": "thinking", "thinking": b["thinking"], "signature": b["thinkingSignature"]})
				}
			case "toolCall":
				content = append(content, block{"type": "tool_use", "id": b["id"], "name": b["name"], "input": b["arguments"]})
			default:
				t.Fatalf("a read-back block of type %v", b["type"])
			}
		}
		switch m.Role {
		case "user":
			out = append(out, map[string]any{"role": "user", "content": content})
		case "assistant":
			if m.StopReason == "error" || m.StopReason == "aborted" {
				continue
			}
			out = append(out, map[string]any{"role": "assistant", "content": content})
		case "toolResult":
			res := block{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": content, "is_error": m.IsError}
			if last := len(out) - 1; last >= 0 && out[last]["role"] == "user" {
				if prev, ok := out[last]["content"].([]block); ok && len(prev) > 0 && prev[0]["type"] == "tool_result" {
					out[last]["content"] = append(prev, res)
					continue
				}
			}
			out = append(out, map[string]any{"role": "user", "content": []block{res}})
		}
	}
	return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": out}
}

func TestAnAnthropicRequestRebuiltFromTheReadBackPassesBeforeRequestPaired(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			a, bb := pngB64(t, color.RGBA{70, 80, 90, 255}), pngB64(t, color.RGBA{7, 8, 9, 255})
			for i, m := range piTurnMessages(t, a, bb) {
				e.doOK("alice", "POST", "/v1/chats/agent/messages", map[string]any{"messages": []json.RawMessage{m}, "receipt": fmt.Sprint("turn-", i)})
			}
			req := anthropicRequest(t, e.readBack("alice", "agent", ""))
			body := e.doOK("alice", "POST", "/v1/chats/agent/hooks/before-request", map[string]any{"format": "anthropic", "mode": "inline", "request": req})
			var ans struct {
				Request struct {
					Messages []struct {
						Role    string
						Content []map[string]any
					}
				}
				Restored   []string
				Unrestored []any
			}
			if err := json.Unmarshal(body, &ans); err != nil {
				t.Fatal(err)
			}
			if len(ans.Restored) != 2 || len(ans.Unrestored) != 0 {
				t.Fatalf("restored %v, unrestored %v: want both images back", ans.Restored, ans.Unrestored)
			}
			// Anthropic takes a tool_use only when the next message answers
			// each of its ids with a tool_result.
			msgs := ans.Request.Messages
			uses := 0
			for k, m := range msgs {
				for _, blk := range m.Content {
					if blk["type"] != "tool_use" {
						continue
					}
					uses++
					id, _ := blk["id"].(string)
					if id == "" || k+1 == len(msgs) || msgs[k+1].Role != "user" {
						t.Fatalf("tool_use %v of message %d has no id or no user message after it", blk, k)
					}
					paired := false
					for _, r := range msgs[k+1].Content {
						paired = paired || (r["type"] == "tool_result" && r["tool_use_id"] == id)
					}
					if !paired {
						t.Fatalf("tool_use %s is not answered by the message after it: %v", id, msgs[k+1].Content)
					}
				}
				if m.Role == "assistant" {
					for _, blk := range m.Content {
						if blk["type"] == "thinking" && blk["signature"] == nil {
							t.Fatalf("thinking without its signature: %v", blk)
						}
					}
				}
			}
			if uses != 2 {
				t.Fatalf("%d tool_use blocks, want the turn's 2", uses)
			}
			if !strings.Contains(string(body), `"is_error":true`) || strings.Count(string(body), `"type":"base64"`) != 2 {
				t.Fatalf("request = %.3000s: want the failed result marked and both images inline", body)
			}
		})
	}
}

func TestALineLargerThanOneRequestImportsInPieces(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			// A message of 12 MiB, more than one request may carry: logged
			// straight into the store, as durachat import does into a data
			// directory, and exported.
			big := json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"` + strings.Repeat("many words ", 12<<20/11) + `"}],"stopReason":"length","timestamp":1}`)
			if _, err := e.chats.Import(t.Context(), "alice", "huge", []importfile.Item{{Line: 1, Message: big}}); err != nil {
				t.Fatal(err)
			}
			export := e.export("alice", "huge")
			if len(export) <= api.MaxBody {
				t.Fatalf("the export is %d bytes, want more than a request's %d", len(export), api.MaxBody)
			}
			c, err := client.New(e.url, client.WithToken(e.tokens["bob"]))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // again: nothing logged twice
				r, err := c.Chat("copy").Import(t.Context(), bytes.NewReader(export))
				if err != nil {
					t.Fatal(err)
				}
				if r.Messages != 1 {
					t.Fatalf("import = %+v, want the one message", r)
				}
			}
			sameJSON(t, "read back", e.readBack("bob", "copy", ""), []json.RawMessage{big})
			if keys, err := b.Blobs.List(t.Context(), e.current("bob", "copy").TextPrefix()+"import/", "", 10); err != nil || len(keys) != 0 {
				t.Fatalf("pieces left after the import: %v, %v", keys, err)
			}

			// Pieces that do not make the line they name are refused, and
			// dropped so the line can be sent again.
			pieces, err := importfile.Cut(append([]byte(`{"seq":0,"message":`), big...), 4<<20)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range pieces {
				if i == 1 {
					var v struct{ Piece map[string]any }
					json.Unmarshal(p, &v)
					v.Piece["data"] = "eHh4" // "xxx"
					p, _ = json.Marshal(v)
				}
				code, body := e.do("bob", "POST", "/v1/chats/other/import", json.RawMessage(p))
				want := http.StatusOK
				if i == len(pieces)-1 {
					want = http.StatusBadRequest
				}
				if code != want {
					t.Fatalf("piece %d: %d %s, want %d", i, code, body, want)
				}
			}
			if keys, _ := b.Blobs.List(t.Context(), e.current("bob", "other").TextPrefix()+"import/", "", 10); len(keys) != 0 {
				t.Fatalf("pieces left after a refused line: %v", keys)
			}
			if p := e.messages("bob", "other", ""); len(p.Messages) != 0 {
				t.Fatalf("a refused line logged %d messages", len(p.Messages))
			}
		})
	}
}
