package client

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/durachat/durachat/client/wire"
)

// Block is a pi-ai content block (wire.Block): text, image, toolCall or
// thinking.
type Block = wire.Block

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

// Content is a message's content blocks (wire.Content). It also decodes
// pi-ai's string content, as one text block.
type Content = wire.Content

// RefName returns the image name of a ref block: a text block whose whole
// text is "[image <16 hex digits>]".
func RefName(b Block) (string, bool) { return wire.RefName(b) }

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

// ToolResult is a pi tool result (wire.ToolResult): what a tool returns,
// what after-tool takes and gives back, and what the memory tools answer.
type ToolResult = wire.ToolResult
