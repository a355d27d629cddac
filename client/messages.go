package client

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

// Block is a pi-ai content block: text, image, toolCall or thinking. Only
// the fields of its type are set.
type Block struct {
	Type string `json:"type"`
	// Text of a text block. A ref block is a text block whose whole text
	// is one ref, "[image <16 hex digits>]".
	Text string `json:"text,omitempty"`
	// Data (base64) and MimeType of an image block; Name is the name it is
	// stored under, when it came from durachat (zoom, before-request).
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	// Name is also a toolCall's tool name.
	Name string `json:"name,omitempty"`
	// ID and Arguments of a toolCall block.
	ID        string          `json:"id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Thinking of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// URL is a signed link to the image of a ref block, in messages read
	// back with links (Chat.Messages); it works for minutes.
	URL string `json:"url,omitempty"`
}

// MarshalJSON keeps the text of a text block even when it is empty.
func (b Block) MarshalJSON() ([]byte, error) {
	type plain Block
	if b.Type != "text" || b.Text != "" {
		return json.Marshal(plain(b))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(b), ""})
}

// Text is a text block.
func Text(text string) Block { return Block{Type: "text", Text: text} }

// Image is an image block of data (PNG, JPEG, GIF or WebP bytes).
func Image(data []byte, mimeType string) Block {
	return Block{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// ToolCall is a toolCall block of an assistant message.
func ToolCall(id, name string, arguments json.RawMessage) Block {
	return Block{Type: "toolCall", ID: id, Name: name, Arguments: arguments}
}

// Content is a message's content blocks. It also decodes pi-ai's string
// content, as one text block.
type Content []Block

func (c *Content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = Content{Text(s)}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Text joins the text of the text blocks, one per line.
func (c Content) Text() string {
	var parts []string
	for _, b := range c {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Refs lists the names of the content's ref blocks, in order.
func (c Content) Refs() []string {
	var names []string
	for _, b := range c {
		if name, ok := RefName(b); ok {
			names = append(names, name)
		}
	}
	return names
}

var refText = regexp.MustCompile(`^\[image ([0-9a-f]{16})\]$`)

// RefName returns the image name of a ref block: a text block whose whole
// text is "[image <16 hex digits>]".
func RefName(b Block) (string, bool) {
	if b.Type != "text" {
		return "", false
	}
	m := refText.FindStringSubmatch(b.Text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Message is a pi-ai message: role "user", "assistant" or "toolResult".
// Append takes any value that encodes to a pi-ai message; Message covers
// the fields durachat reads and the common ones of pi-ai.
type Message struct {
	Role      string  `json:"role"`
	Content   Content `json:"content"`
	Timestamp int64   `json:"timestamp,omitempty"` // Unix milliseconds
	// ToolCallID, ToolName, IsError and Details of a toolResult message.
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
	// Kind marks a sub-agent's report ("work") or an imported note ("note").
	Kind string `json:"kind,omitempty"`
	// Provider, Model and StopReason of an assistant message.
	Provider   string `json:"provider,omitempty"`
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

// UserText is a user message of one text block, stamped now.
func UserText(text string) Message {
	return Message{Role: "user", Content: Content{Text(text)}, Timestamp: time.Now().UnixMilli()}
}

// AssistantMessage is an assistant message of the given blocks, stamped now.
func AssistantMessage(blocks ...Block) Message {
	return Message{Role: "assistant", Content: blocks, Timestamp: time.Now().UnixMilli()}
}

// ToolResultMessage is the toolResult message of a call's result (after
// AfterTool), stamped now.
func ToolResultMessage(callID, toolName string, r ToolResult) Message {
	return Message{Role: "toolResult", ToolCallID: callID, ToolName: toolName, Content: r.Content,
		IsError: r.IsError, Details: r.Details, Timestamp: time.Now().UnixMilli()}
}

// ToolResult is a pi tool result: what a tool returns, what after-tool
// takes and gives back, and what the memory tools answer.
type ToolResult struct {
	Content Content `json:"content"`
	IsError bool    `json:"isError"`
	// Details is a host's own data about the result, passed through.
	Details json.RawMessage `json:"details,omitempty"`
}
