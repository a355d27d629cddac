package mcp

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// inputSchemas are the input schemas tools/list serves, by tool, compiled
// by a JSON Schema validator of its own.
func inputSchemas(t *testing.T, o Options) map[string]*jsonschema.Schema {
	t.Helper()
	cs := session(t, fakeMemory{}, o)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Schema{}
	for _, tl := range list.Tools {
		raw, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(tl.Name+".json", doc); err != nil {
			t.Fatal(err)
		}
		if out[tl.Name], err = c.Compile(tl.Name + ".json"); err != nil {
			t.Fatalf("the %s tool's input schema is not a JSON Schema: %v\n%s", tl.Name, err, raw)
		}
	}
	return out
}

func validate(t *testing.T, s *jsonschema.Schema, args string) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	return s.Validate(doc)
}

// TestTheLogToolsSchemaAcceptsPiMessages: the log tool's input schema, as
// tools/list serves it, takes pi messages as pi sends them (string content,
// a toolCall's object arguments, image blocks, a toolResult's details,
// and the fields of pi's own that durachat does not read), and still
// refuses what is not a pi message.
func TestTheLogToolsSchemaAcceptsPiMessages(t *testing.T) {
	for _, o := range []Options{{}, {Chat: "c"}} {
		log := inputSchemas(t, o)["log"]
		chat := `"chat": "c", `
		if o.Chat != "" {
			chat = ""
		}
		for _, c := range []struct {
			name, messages string
			ok             bool
		}{
			{"a user message of string content", `[{"role": "user", "content": "Why does the login page fail?", "timestamp": 1718000000000}]`, true},
			{"a user message of text and an image", `[{"role": "user", "content": [{"type": "text", "text": "Here it is."},
				{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}], "timestamp": 1718000000000}]`, true},
			{"an assistant message with thinking, text and a tool call", `[{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "The cookie, maybe.", "thinkingSignature": "c2ln"},
				{"type": "text", "text": "Let me look.", "textSignature": "dA=="},
				{"type": "toolCall", "id": "call_1", "name": "screenshot", "arguments": {"url": "https://example.com/login", "fullPage": true}}],
				"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
				"usage": {"input": 120, "output": 40, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 160,
					"cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
				"stopReason": "toolUse", "timestamp": 1718000001000}]`, true},
			{"a tool result with an image and details", `[{"role": "toolResult", "toolCallId": "call_1", "toolName": "screenshot",
				"content": [{"type": "text", "text": "The login page."}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
				"details": {"width": 1280, "height": 800, "path": "shots/login.png"}, "isError": false, "timestamp": 1718000002000}]`, true},
			{"a tool result whose details are a list", `[{"role": "toolResult", "toolCallId": "call_2", "toolName": "ls",
				"content": [{"type": "text", "text": "a b"}], "details": ["a", "b"], "isError": false}]`, true},
			{"a message without a role", `[{"content": "hi"}]`, false},
			{"content that is a number", `[{"role": "user", "content": 7}]`, false},
			{"a block without a type", `[{"role": "user", "content": [{"text": "hi"}]}]`, false},
			{"tool call arguments that are a list of bytes", `[{"role": "assistant", "content": [
				{"type": "toolCall", "id": "call_1", "name": "screenshot", "arguments": [123, 125]}]}]`, false},
			{"messages that are not a list", `{"role": "user", "content": "hi"}`, false},
		} {
			args := "{" + chat + `"messages": ` + c.messages + "}"
			if err := validate(t, log, args); (err == nil) != c.ok {
				t.Errorf("chat %q: %s: valid = %v, want %v (%v)", o.Chat, c.name, err == nil, c.ok, err)
			}
		}
	}
}

// TestEveryToolsSchemaAcceptsItsDocumentedExamples: each example call of
// the MCP page (a JSON block {"name", "arguments"}) is valid against the
// input schema tools/list serves for its tool, and every tool has one.
func TestEveryToolsSchemaAcceptsItsDocumentedExamples(t *testing.T) {
	schemas := inputSchemas(t, Options{OptIn: true})
	doc, err := os.ReadFile("../../docs/integrate/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string]int{}
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(m[1]), &call) != nil || call.Name == "" || call.Arguments == nil {
			continue // not a tool call
		}
		s := schemas[call.Name]
		if s == nil {
			t.Errorf("the example calls a tool %q that tools/list does not list", call.Name)
			continue
		}
		examples[call.Name]++
		if err := validate(t, s, string(call.Arguments)); err != nil {
			t.Errorf("the %s example does not fit the tool's input schema: %v\n%s", call.Name, err, m[1])
		}
	}
	for name := range schemas {
		if examples[name] == 0 {
			t.Errorf("the MCP page has no example of the %s tool", name)
		}
	}
	if len(examples) == 0 {
		t.Fatal("the MCP page has no example calls")
	}
}
