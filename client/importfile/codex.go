package importfile

import (
	"encoding/json"
	"strings"
)

// codexReader reads a Codex CLI rollout: JSONL of RolloutLines,
// {"timestamp", "type", "payload"} (codex-rs/protocol's RolloutItem:
// session_meta, response_item, compacted, turn_context, event_msg), or in
// rollouts older than RolloutLine a header and then bare response items.
//
// Response items (codex-rs/protocol's ResponseItem) are read into pi
// messages: a user message (input_text, input_image data URLs) is a user
// message; the assistant's reasoning, messages (output_text), function
// calls, custom tool calls and local shell calls up to the next user
// message or tool output are one assistant message (thinking, text and
// toolCall blocks keeping each call_id); a function_call_output or
// custom_tool_call_output is a toolResult naming the call's tool, its
// text and images as blocks. The user messages Codex writes itself
// (codexContextTags) are skipped and counted by kind, as
// "response_item/message/user/<kind>". Developer and system messages
// (instructions Codex sends each turn), encrypted reasoning, web searches, compactions,
// turn contexts, the session's metadata and events (a copy of what the
// response items hold, for the UI) are skipped and counted: a line by its
// type, a response item as "response_item/<type>" (a message as
// "response_item/message/<role>").
type codexReader struct {
	skipped Skipped
	emit    func(Item) error
	names   map[string]string // the tool of each call_id
	asst    pending
}

// codexItem is a ResponseItem, of any type.
type codexItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Summary   []codexText     `json:"summary"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	ID        string          `json:"id"`
	Output    json.RawMessage `json:"output"`
	Action    json.RawMessage `json:"action"`
}

// codexText is a content item: input_text, output_text, input_image,
// summary_text, reasoning_text.
type codexText struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
}

func (r *codexReader) line(l line) error {
	payload := l.Payload
	switch {
	case l.Type == "response_item" && payload != nil:
	case l.Payload == nil && codexBare(l):
		payload = l.raw // an older rollout's bare response item
	default:
		r.skipped.add(l.kind())
		return nil
	}
	var it codexItem
	if err := json.Unmarshal(payload, &it); err != nil {
		return lineErr(l.n, "a Codex response item", err)
	}
	return r.item(l, it, millis(l.Timestamp))
}

// codexBare reports whether the line is an older rollout's response item.
func codexBare(l line) bool {
	return l.Type == "message" && l.Message == nil && l.Role != "" || codexItemType[l.Type] && l.Message == nil
}

func (r *codexReader) item(l line, it codexItem, ts int64) error {
	switch it.Type {
	case "message":
		return r.message(l, it, ts)
	case "reasoning":
		if t := reasoningText(it); t != "" {
			r.asst.add(l, "", ts, piBlock{Type: "thinking", Thinking: t})
			return nil
		}
	case "function_call":
		r.names[it.CallID] = it.Name
		r.asst.add(l, "", ts, piBlock{Type: "toolCall", ID: it.CallID, Name: it.Name, Arguments: toolArguments(it.Arguments)})
		return nil
	case "custom_tool_call":
		r.names[it.CallID] = it.Name
		r.asst.add(l, "", ts, piBlock{Type: "toolCall", ID: it.CallID, Name: it.Name, Arguments: toolArguments(it.Input)})
		return nil
	case "local_shell_call":
		id := it.CallID
		if id == "" {
			id = it.ID
		}
		r.names[id] = "local_shell"
		args := it.Action
		if len(args) == 0 || args[0] != '{' {
			args = json.RawMessage(`{}`)
		}
		r.asst.add(l, "", ts, piBlock{Type: "toolCall", ID: id, Name: "local_shell", Arguments: args})
		return nil
	case "function_call_output", "custom_tool_call_output":
		if err := r.asst.flush(r.emit); err != nil {
			return err
		}
		return emitMessage(r.emit, l.n, l.end, toolResult(it.CallID, r.names[it.CallID], false, ts, codexOutput(it.Output)))
	}
	r.skipped.add("response_item/" + it.Type)
	return nil
}

func (r *codexReader) message(l line, it codexItem, ts int64) error {
	var content []codexText
	if err := json.Unmarshal(it.Content, &content); err != nil {
		var s string
		if json.Unmarshal(it.Content, &s) != nil {
			return lineErr(l.n, "a Codex message's content", err)
		}
		content = []codexText{{Type: "input_text", Text: s}}
	}
	blocks := codexBlocks(content)
	switch {
	case it.Role == "assistant":
		r.asst.add(l, "", ts, blocks...)
		return nil
	case it.Role != "user" || len(blocks) == 0:
		r.skipped.add("response_item/message/" + it.Role)
		return nil
	}
	if kind := codexContext(content); kind != "" {
		r.skipped.add("response_item/message/user/" + kind)
		return nil
	}
	if err := r.asst.flush(r.emit); err != nil {
		return err
	}
	return emitMessage(r.emit, l.n, l.end, &piMessage{Role: "user", Content: blocks, Timestamp: ts})
}

func (r *codexReader) end() error { return r.asst.flush(r.emit) }

// codexContextTags are the tags that open a user message Codex writes
// itself, by the kind an import counts it as: the session's environment
// (working directory, shell, sandbox), the user's and the project's
// instructions (AGENTS.md), a skill's, a turn's interruption, a
// subagent's notification, a context update, and a "!" shell command of
// the user with its output. Codex itself does not take them for the
// user's turns (codex-rs core's contextual user messages); they are
// skipped as pi's system messages and bash executions are.
var codexContextTags = []struct{ open, kind string }{
	{"<environment_context>", "environment_context"},
	{"<user_instructions>", "user_instructions"},
	{"# AGENTS.md instructions for ", "agents_md"},
	{"<skill>", "skill"},
	{"<turn_aborted>", "turn_aborted"},
	{"<subagent_notification>", "subagent_notification"},
	{"<context_update>", "context_update"},
	{"<user_shell_command>", "user_shell_command"},
}

// codexContext is the kind of a user message Codex writes itself (one
// of its texts opens with a codexContextTags tag), "" for the user's own.
func codexContext(content []codexText) string {
	for _, c := range content {
		text := strings.TrimLeft(c.Text, " \t\r\n")
		for _, t := range codexContextTags {
			if len(text) >= len(t.open) && strings.EqualFold(text[:len(t.open)], t.open) {
				return t.kind
			}
		}
	}
	return ""
}

// codexBlocks are content items as pi blocks; empty text is dropped.
func codexBlocks(content []codexText) []piBlock {
	var blocks []piBlock
	for _, c := range content {
		switch {
		case c.Type == "input_image":
			blocks = append(blocks, imageURLBlock(c.ImageURL))
		case c.Text != "":
			blocks = append(blocks, textBlock(c.Text))
		}
	}
	return blocks
}

// codexOutput is a function call's output (FunctionCallOutputPayload): a
// string, or content items of text and images.
func codexOutput(out json.RawMessage) []piBlock {
	var s string
	if json.Unmarshal(out, &s) == nil {
		if s == "" {
			return nil
		}
		return []piBlock{textBlock(s)}
	}
	var items []codexText
	if json.Unmarshal(out, &items) == nil {
		return codexBlocks(items)
	}
	if len(out) > 0 && string(out) != "null" {
		return []piBlock{textBlock(string(out))}
	}
	return nil
}

// reasoningText is the readable text of a reasoning item: its summary
// and its content, "" when it is encrypted only.
func reasoningText(it codexItem) string {
	var parts []string
	for _, s := range it.Summary {
		if s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	var content []codexText
	if json.Unmarshal(it.Content, &content) == nil {
		for _, c := range content {
			if c.Text != "" {
				parts = append(parts, c.Text)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}
