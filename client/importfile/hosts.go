package importfile

import (
	"encoding/json"
	"strings"
	"time"
)

// piMessage is a pi message as another host's session is read into: pi-ai's
// UserMessage, AssistantMessage and ToolResultMessage, with the tool-call
// ids the host gave.
type piMessage struct {
	Role       string    `json:"role"`
	Content    []piBlock `json:"content"`
	ToolCallID string    `json:"toolCallId,omitempty"`
	ToolName   string    `json:"toolName,omitempty"`
	IsError    *bool     `json:"isError,omitempty"`
	Timestamp  int64     `json:"timestamp,omitempty"`
}

// piBlock is a block of a pi message: text, thinking, image or toolCall.
type piBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Data      string          `json:"data,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

func textBlock(s string) piBlock { return piBlock{Type: "text", Text: &s} }

// imageURLBlock is the block of an image given by URL: an image block for
// a base64 data URL, the URL as text for any other.
func imageURLBlock(url string) piBlock {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if mime, data, ok := strings.Cut(rest, ";base64,"); ok {
			return piBlock{Type: "image", Data: data, MimeType: mime}
		}
	}
	return textBlock("[image at " + url + "]")
}

// toolArguments is a tool call's arguments as pi keeps them, a JSON
// object: the host's arguments when they are one, else {"input": ...}.
func toolArguments(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(map[string]string{"input": args}) // a string always marshals
	return b
}

// millis reads a host's RFC 3339 timestamp as pi's milliseconds, 0 when
// there is none.
func millis(ts json.RawMessage) int64 {
	var s string
	if json.Unmarshal(ts, &s) != nil {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// pending is the assistant message a host writes as several lines (Codex's
// reasoning, text and calls; Claude Code's one line a content block), put
// together until a line of another message comes.
type pending struct {
	msg  *piMessage
	line int
	end  int64
	key  string // what tells the lines of one message (Claude Code's message id)
}

func (p *pending) add(l line, key string, ts int64, blocks ...piBlock) {
	if p.msg == nil {
		p.msg = &piMessage{Role: "assistant", Content: []piBlock{}, Timestamp: ts}
		p.line, p.key = l.n, key
	}
	p.msg.Content = append(p.msg.Content, blocks...)
	p.end = l.end
}

// flush emits the message put together, if any.
func (p *pending) flush(emit func(Item) error) error {
	if p.msg == nil {
		return nil
	}
	msg := p.msg
	p.msg = nil
	return emitMessage(emit, p.line, p.end, msg)
}

func emitMessage(emit func(Item) error, n int, end int64, msg *piMessage) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return emit(Item{Line: n, Message: b, End: end})
}

// toolResult is a tool's result as pi keeps it.
func toolResult(callID, name string, isError bool, ts int64, content []piBlock) *piMessage {
	if name == "" {
		name = "unknown"
	}
	if len(content) == 0 {
		content = []piBlock{textBlock("(no output)")}
	}
	return &piMessage{Role: "toolResult", ToolCallID: callID, ToolName: name, IsError: &isError, Content: content, Timestamp: ts}
}
