package importfile

import (
	"encoding/json"
)

// claudeReader reads a Claude Code session: JSONL of lines, each
// {"type", "uuid", "parentUuid", "isSidechain", "sessionId", "timestamp",
// "message", ...}, the conversation a tree by parentUuid (a compaction's
// boundary naming the line before it as logicalParentUuid).
//
// The lines on the branch the session ended on are read; a user or
// assistant line's message holds Anthropic Messages API content blocks.
// Claude Code writes an assistant message one content block a line, each
// with the message's id: they are put together into one pi assistant
// message (text, thinking and toolCall blocks, each tool_use's id kept).
// A user line's tool_result blocks are toolResult messages naming the
// call's tool (their text and base64 images as blocks), its other blocks
// a user message. A line's toolUseResult (a copy of the result for
// Claude Code's UI) is not read. Sidechain lines (a subagent's), meta and
// compaction-summary user lines, system lines, summaries, file-history
// snapshots and any other line are skipped and counted by kind
// ("sidechain", "user/meta", "user/compactSummary", or the line's type).
type claudeReader struct {
	skipped Skipped
	emit    func(Item) error
	on      map[int]bool
	names   map[string]string // the tool of each tool_use id
	asst    pending
}

// claudeMessage is an Anthropic message of a user or assistant line.
type claudeMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

// claudeBlock is an Anthropic content block, of any type.
type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

func (r *claudeReader) line(l line) error {
	kind := ""
	switch {
	case l.IsSidechain:
		kind = "sidechain"
	case l.UUID != "" && !r.on[l.n]:
		kind = "off-branch"
	case l.Type == "user" && l.IsMeta:
		kind = "user/meta"
	case l.Type == "user" && l.IsCompactSummary:
		kind = "user/compactSummary"
	case l.Type != "user" && l.Type != "assistant":
		kind = l.kind()
	}
	if kind != "" {
		r.skipped.add(kind)
		return nil
	}
	var m claudeMessage
	if err := json.Unmarshal(l.Message, &m); err != nil {
		return lineErr(l.n, "a Claude Code message", err)
	}
	blocks, err := claudeContent(m.Content)
	if err != nil {
		return lineErr(l.n, "a Claude Code message's content", err)
	}
	ts := millis(l.Timestamp)
	if l.Type == "assistant" {
		return r.assistant(l, m.ID, ts, blocks)
	}
	if err := r.asst.flush(r.emit); err != nil {
		return err
	}
	return r.user(l, ts, blocks)
}

func (r *claudeReader) assistant(l line, id string, ts int64, blocks []claudeBlock) error {
	if r.asst.msg != nil && (id == "" || id != r.asst.key) {
		if err := r.asst.flush(r.emit); err != nil {
			return err
		}
	}
	var out []piBlock
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			r.names[b.ID] = b.Name
			args := b.Input
			if len(args) == 0 || args[0] != '{' {
				args = json.RawMessage(`{}`)
			}
			out = append(out, piBlock{Type: "toolCall", ID: b.ID, Name: b.Name, Arguments: args})
		case "thinking":
			out = append(out, piBlock{Type: "thinking", Thinking: b.Thinking})
		default:
			out = append(out, claudeBlocks([]claudeBlock{b})...)
		}
	}
	r.asst.add(l, id, ts, out...)
	return nil
}

// user emits a user line's messages in the order of its blocks: each
// tool_result a toolResult, each run of other blocks a user message.
func (r *claudeReader) user(l line, ts int64, blocks []claudeBlock) error {
	var run []claudeBlock
	flush := func() error {
		if b := claudeBlocks(run); len(b) > 0 {
			run = nil
			return emitMessage(r.emit, l.n, l.end, &piMessage{Role: "user", Content: b, Timestamp: ts})
		}
		return nil
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			run = append(run, b)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		inner, err := claudeContent(b.Content)
		if err != nil {
			return lineErr(l.n, "a tool_result's content", err)
		}
		if err := emitMessage(r.emit, l.n, l.end, toolResult(b.ToolUseID, r.names[b.ToolUseID], b.IsError, ts, claudeBlocks(inner))); err != nil {
			return err
		}
	}
	return flush()
}

func (r *claudeReader) end() error { return r.asst.flush(r.emit) }

// claudeContent reads content: a string, or content blocks.
func claudeContent(raw json.RawMessage) ([]claudeBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []claudeBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []claudeBlock
	err := json.Unmarshal(raw, &blocks)
	return blocks, err
}

// claudeBlocks are text and image blocks as pi blocks; empty text and
// blocks of no chat meaning (redacted thinking) are dropped.
func claudeBlocks(blocks []claudeBlock) []piBlock {
	var out []piBlock
	for _, b := range blocks {
		switch {
		case b.Type == "text" && b.Text != "":
			out = append(out, textBlock(b.Text))
		case b.Type == "image" && b.Source != nil && b.Source.Type == "base64":
			out = append(out, piBlock{Type: "image", Data: b.Source.Data, MimeType: b.Source.MediaType})
		case b.Type == "image" && b.Source != nil && b.Source.URL != "":
			out = append(out, textBlock("[image at "+b.Source.URL+"]"))
		}
	}
	return out
}
