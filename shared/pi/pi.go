// Package pi holds pi-ai's message and content block shapes, the canonical
// format of durachat's API. Fields durachat does not know are kept and
// written back unchanged, so a host's messages pass through intact.
package pi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/rawjson"
)

// Block types.
const (
	TypeText     = "text"
	TypeImage    = "image"
	TypeToolCall = "toolCall"
	TypeThinking = "thinking"
)

// Roles.
const (
	RoleUser       = "user"
	RoleAssistant  = "assistant"
	RoleToolResult = "toolResult"
)

// Block is one content block. Extra holds fields this package does not name.
type Block struct {
	Type      string
	Text      string
	Data      string // base64, for images
	MimeType  string
	ID        string
	Name      string
	Arguments json.RawMessage
	Thinking  string
	Extra     map[string]json.RawMessage
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: TypeText, Text: s} }

var blockFields = []string{"type", "text", "data", "mimeType", "id", "name", "arguments", "thinking"}

func (b *Block) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*b = Block{}
	str := func(k string, dst *string) error {
		raw, ok := m[k]
		if !ok {
			return nil
		}
		delete(m, k)
		if bytes.Equal(raw, []byte("null")) {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fieldError(k, "must be a string")
		}
		return nil
	}
	for _, f := range []struct {
		k   string
		dst *string
	}{{"type", &b.Type}, {"text", &b.Text}, {"data", &b.Data}, {"mimeType", &b.MimeType}, {"id", &b.ID}, {"name", &b.Name}, {"thinking", &b.Thinking}} {
		if err := str(f.k, f.dst); err != nil {
			return err
		}
	}
	if raw, ok := m["arguments"]; ok {
		b.Arguments = append(json.RawMessage(nil), raw...)
		delete(m, "arguments")
	}
	if b.Type == "" {
		return fieldError("type", "is required")
	}
	if len(m) > 0 {
		b.Extra = m
	}
	return nil
}

func (b Block) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(b.Extra)+4)
	for k, v := range b.Extra {
		m[k] = v
	}
	m["type"] = b.Type
	switch b.Type {
	case TypeText:
		m["text"] = b.Text
	case TypeImage:
		m["data"] = b.Data
		m["mimeType"] = b.MimeType
	case TypeThinking:
		m["thinking"] = b.Thinking
	}
	for k, v := range map[string]string{"text": b.Text, "data": b.Data, "mimeType": b.MimeType, "id": b.ID, "name": b.Name, "thinking": b.Thinking} {
		if v != "" {
			m[k] = v
		}
	}
	if len(b.Arguments) > 0 {
		m["arguments"] = b.Arguments
	}
	return json.Marshal(m)
}

// Content is a message's content: a plain string or a list of blocks.
// IsString records which, so it is written back in the shape it came in.
type Content struct {
	IsString bool
	Blocks   []Block
}

func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*c = Content{IsString: true, Blocks: []Block{TextBlock(s)}}
		return nil
	}
	var bs []Block
	if err := json.Unmarshal(data, &bs); err != nil {
		return err
	}
	*c = Content{Blocks: bs}
	return nil
}

func (c Content) MarshalJSON() ([]byte, error) {
	if c.IsString && len(c.Blocks) == 1 && c.Blocks[0].Type == TypeText {
		return json.Marshal(c.Blocks[0].Text)
	}
	if c.Blocks == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.Blocks)
}

// Message is a pi-ai message. Kind is durachat's optional log kind ("work",
// "note"); Extra holds every other field (timestamp, usage, api, ...).
type Message struct {
	Role       string
	Content    Content
	ToolCallID string
	ToolName   string
	IsError    bool
	Kind       string
	Extra      map[string]json.RawMessage
	// Raw is the JSON the message was decoded from, every field as sent
	// (nil for a message built in code): the log records it, so a message
	// reads back as the host sent it, not as this type would write it.
	Raw json.RawMessage
}

// UnmarshalJSON decodes a copy of data (DecodeOwned).
func (m *Message) UnmarshalJSON(data []byte) error {
	return m.decode(bytes.Clone(data))
}

// DecodeOwned decodes the message JSON data without copying it: the
// message keeps slices of it (Raw, and Extra's values), so data must be
// the caller's to give, never written to afterwards (a request body read
// whole). A large text is then held once as sent and once decoded.
func DecodeOwned(data []byte) (Message, error) {
	var m Message
	err := m.decode(data[:len(data):len(data)])
	return m, err
}

// decode decodes own, which the message keeps: its fields are slices of
// it (capped: appending to one never writes into the next).
func (m *Message) decode(own []byte) error {
	var fields map[string]rawjson.Value
	if err := json.Unmarshal(own, &fields); err != nil {
		return err
	}
	raw := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		raw[k] = json.RawMessage(v)
	}
	*m = Message{Raw: own}
	take := func(k string, dst any, what string) error {
		v, ok := raw[k]
		if !ok {
			return nil
		}
		delete(raw, k)
		if bytes.Equal(v, []byte("null")) {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			if e, ok := err.(*fault.Error); ok {
				return e.Within(k) // a block's field
			}
			return fieldError(k, what)
		}
		return nil
	}
	for _, f := range []struct {
		k    string
		dst  any
		what string
	}{
		{"role", &m.Role, "must be a string"},
		{"content", &m.Content, "must be a string or a list of content blocks"},
		{"toolCallId", &m.ToolCallID, "must be a string"},
		{"toolName", &m.ToolName, "must be a string"},
		{"isError", &m.IsError, "must be a boolean"},
		{"kind", &m.Kind, "must be a string"},
	} {
		if err := take(f.k, f.dst, f.what); err != nil {
			return err
		}
	}
	switch m.Role {
	case RoleUser, RoleAssistant, RoleToolResult:
	case "":
		return fieldError("role", "is required")
	default:
		return fieldError("role", fmt.Sprintf("%q is not user, assistant or toolResult", m.Role))
	}
	if len(raw) > 0 {
		m.Extra = raw
	}
	return nil
}

func (m Message) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m.Extra)+6)
	for k, v := range m.Extra {
		out[k] = v
	}
	out["role"] = m.Role
	out["content"] = m.Content
	if m.Role == RoleToolResult {
		out["toolCallId"] = m.ToolCallID
		out["toolName"] = m.ToolName
		out["isError"] = m.IsError
	}
	if m.Kind != "" {
		out["kind"] = m.Kind
	}
	return json.Marshal(out)
}

// fieldError is a decoding error naming the offending field, a bad request:
// its message is the field's name and what is wrong with it.
func fieldError(field, what string) *fault.Error {
	return &fault.Error{Code: fault.BadRequest, Field: field, Message: field + " " + what}
}

// ExtraKeys lists a map's keys sorted, for tests and logs.
func ExtraKeys(m map[string]json.RawMessage) []string {
	ks := make([]string, 0, len(m))
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
