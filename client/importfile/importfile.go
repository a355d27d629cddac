// Package importfile reads the files durachat imports into a chat: its
// own exports (JSONL of {"seq", "message"}) and pi coding-agent session
// files (JSONL of typed entries, a tree since version 2). It lives in the
// Go client's module, which depends on the standard library only, and the
// server imports it from there: one parser for the client, the CLI and the
// import route.
package importfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
)

// Item is one line of a file to import: a pi message to log, or an image
// an export carries ahead of the messages whose ref blocks name it.
type Item struct {
	// Line is the line of the file it was read from, from 1.
	Line int
	// Message is a pi message; nil on an image's line.
	Message json.RawMessage
	// Image is an exported image, {"name", "mimeType", "data"}: stored
	// under its name before the messages after it are logged.
	Image json.RawMessage
	// Piece is a Piece of a line too large for one request.
	Piece json.RawMessage
	// End is how many bytes of the file are read up to the end of its
	// line: how far an import has got.
	End int64
	// Place is where a message is in the file it was read from, for the
	// receipt of the append that logs it.
	Place Place
}

// Place is where a message is in the file it comes from. An import
// append's receipt names the place of its first message as well as its
// messages: the same file imported again logs nothing twice, and the same
// messages at two places of a file (a run of calls repeated with their
// results) are both logged.
type Place struct {
	// File names the file: the digest of its first line (a session's
	// header, an export's first message).
	File string `json:"file"`
	// Line is the message's line in that file.
	Line int `json:"line"`
}

// Piece is one piece of a line too large for one import request, on a
// line of its own: {"piece": {"line", "index", "count", "data"}}. The
// sender cuts such a line with Cut and sends its pieces in order, each in
// a request of its own; the import puts the line back together when the
// last arrives, checks it against Line and imports it.
type Piece struct {
	// Line is the hex SHA-256 of the whole line.
	Line  string `json:"line"`
	Index int    `json:"index"`
	Count int    `json:"count"`
	// Data is the piece's bytes of the line (base64 in JSON).
	Data []byte `json:"data"`
}

// Cut cuts line into the lines of its pieces, each carrying at most size
// bytes of it.
func Cut(line []byte, size int) ([][]byte, error) {
	sum := sha256.Sum256(line)
	count := (len(line) + size - 1) / size
	out := make([][]byte, 0, count)
	for i := range count {
		p := Piece{Line: hex.EncodeToString(sum[:]), Index: i, Count: count, Data: line[i*size : min(len(line), (i+1)*size)]}
		b, err := json.Marshal(struct {
			Piece Piece `json:"piece"`
		}{p})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Parse reads an export, a pi coding-agent session file (pi 0.73 and
// 1.x), a Codex CLI rollout or a Claude Code session into the pi messages
// to log and the images an export carries, in order: Read of a file held
// in memory (an import request's body).
func Parse(r io.Reader) (items []Item, skipped Skipped, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the file: %w", err)
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	skipped, err = Read(open, func(it Item) error {
		items = append(items, it)
		return nil
	})
	return items, skipped, err
}

// Read reads a file to import and calls emit with its items in order:
// the pi messages to log and the images an export carries. open opens
// the file; Read opens it twice, once to learn its format and the branch
// a session ended on, once for the items, so it holds one line at a
// time (and the ids of a session's entries) whatever the file's size.
//
// A session is a tree (pi v2 and later: each entry names its parent; a
// Claude Code session: each line its parentUuid); its messages are those
// on the path to its last entry, the branch the session ended on. What it
// does not log is counted in skipped by kind: an entry of another branch
// as "off-branch", a message entry whose role durachat does not log as
// "message/<role>" (pi 1.x's system messages, its bash executions, custom
// messages, branch and compaction summaries), any other entry or line by
// its type (model and thinking-level changes, custom entries and
// messages, compactions, branch summaries, labels). Codex and Claude Code
// files are read as hostFormats says.
//
// A file no line of which is in a format durachat reads is a
// *FormatError: never a file read as holding nothing.
func Read(open func() (io.ReadCloser, error), emit func(Item) error) (Skipped, error) {
	s, err := surveyFile(open)
	if err != nil {
		return nil, err
	}
	skipped := Skipped{}
	em := s.emitter(skipped, func(it Item) error {
		if it.Message != nil && it.Place.File == "" {
			it.Place = Place{File: s.file, Line: it.Line}
		}
		return emit(it)
	})
	err = eachLine(open, func(l line) error { return em.line(l) })
	if err == nil {
		err = em.end()
	}
	return skipped, err
}

// Skipped counts the lines of a file an import does not log, by kind.
type Skipped map[string]int

// Total is the number of lines skipped.
func (s Skipped) Total() int {
	n := 0
	for _, c := range s {
		n += c
	}
	return n
}

func (s Skipped) add(kind string) { s[kind]++ }

// FormatError is a file no format durachat imports reads: Found names what
// it is ("a Codex CLI rollout"), or what its lines are, and Line the first
// line that says so.
type FormatError struct {
	Line  int
	Found string
}

func (e *FormatError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.What()) }

// What says what the file is, without its line.
func (e *FormatError) What() string {
	return "the file is " + e.Found + "; durachat imports its own exports, pi session files, Codex CLI rollouts and Claude Code sessions"
}

// Lines of other hosts' session files, by what tells them apart: a Codex
// CLI rollout line is {"timestamp", "type", "payload"} with one of these
// types (codex-rs/protocol's RolloutLine; rollouts before it held the
// response items themselves, one a line); a Claude Code session line
// carries "uuid" and "sessionId" (user, assistant and system lines) or is
// a summary naming its "leafUuid" or a file-history snapshot.
var (
	codexLine     = map[string]bool{"session_meta": true, "response_item": true, "event_msg": true, "turn_context": true, "compacted": true}
	codexItemType = map[string]bool{"function_call": true, "function_call_output": true, "local_shell_call": true, "reasoning": true,
		"custom_tool_call": true, "custom_tool_call_output": true, "web_search_call": true}
	// piEntry are the types of a pi session's lines (pi 0.73 and 1.x).
	piEntry = map[string]bool{"session": true, "message": true, "thinking_level_change": true, "model_change": true, "usage": true,
		"compaction": true, "branch_summary": true, "custom": true, "custom_message": true, "context_edit": true, "label": true, "session_info": true}
)

// codex reports whether the line is a Codex CLI rollout's: a
// {timestamp, type, payload} line, or an older bare response item.
func (l line) codex() bool {
	return l.Payload != nil && codexLine[l.Type] || codexBare(l)
}

// claudeCode reports whether the line is a Claude Code session's.
func (l line) claudeCode() bool {
	return l.UUID != "" && l.SessionID != "" || l.LeafUUID != "" || l.Type == "file-history-snapshot"
}

// readable reports whether the line is an export's or a pi session's.
func (l line) readable() bool {
	return l.Seq != nil || l.Type == "" && (len(l.Image) > 0 || len(l.Piece) > 0) || piEntry[l.Type]
}

// lineErr is a line of a file its format does not read.
func lineErr(n int, what string, err error) error {
	return fmt.Errorf("line %d is not %s: %w", n, what, err)
}

// line is one line of an export or a session file, of any host.
type line struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	ParentID *string         `json:"parentId"`
	Seq      *int64          `json:"seq"`
	Message  json.RawMessage `json:"message"`
	Image    json.RawMessage `json:"image"`
	Piece    json.RawMessage `json:"piece"`
	// At is the place in its file of a message sent in a part of it
	// (Item.Place): a line's own place when absent or not a place.
	At json.RawMessage `json:"at"`
	// A Codex CLI rollout's RolloutLine, and an older rollout's bare
	// response item (its role, and the line itself as its payload).
	Payload   json.RawMessage `json:"payload"`
	Timestamp json.RawMessage `json:"timestamp"`
	Role      string          `json:"role"`
	// A Claude Code session's line.
	UUID              string  `json:"uuid"`
	ParentUUID        *string `json:"parentUuid"`
	LogicalParentUUID string  `json:"logicalParentUuid"`
	SessionID         string  `json:"sessionId"`
	LeafUUID          string  `json:"leafUuid"`
	IsSidechain       bool    `json:"isSidechain"`
	IsMeta            bool    `json:"isMeta"`
	IsCompactSummary  bool    `json:"isCompactSummary"`
	n                 int
	raw               []byte // the line as the file has it, until the next line is read
	end               int64  // the file's bytes up to the end of the line
}

// keep reports whether the line is a message to log: an export's message
// line or a session's message entry, but those of the roles pi keeps and
// durachat does not log (unloggedRole).
func (l line) keep() bool {
	if len(l.Message) == 0 {
		return false
	}
	return l.Seq != nil || l.Type == "message" && !Unlogged(l.role())
}

// Unlogged reports whether a message of this role is one of pi's that
// durachat does not log.
func Unlogged(role string) bool { return unloggedRole[role] }

// unloggedRole are the roles of pi's session messages that durachat does
// not log: pi 1.x's system messages (its prompt and tools), and the
// coding agent's bash executions (a "!" command), custom messages, branch
// and compaction summaries. Any other role is imported, and the import
// refuses one that is not user, assistant or toolResult, naming its line.
var unloggedRole = map[string]bool{"system": true, "bashExecution": true, "custom": true, "branchSummary": true, "compactionSummary": true}

// role is the role of the line's message, "" when it names none.
func (l line) role() string {
	var m struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(l.Message, &m) // not an object: no role, and the import names the line
	return m.Role
}

// kind names a line an import skips: its type, or the message role of a
// message entry.
func (l line) kind() string {
	switch {
	case l.Type == "message" && len(l.Message) > 0:
		return "message/" + l.role()
	case l.Type == "":
		return "untyped"
	}
	return l.Type
}

func (l line) item() Item {
	it := Item{Line: l.n, Message: l.Message, End: l.end}
	var at Place
	if json.Unmarshal(l.At, &at) == nil {
		it.Place = at
	}
	return it
}

// RenameRefs makes the refs in a message to each renamed image refs to
// its new name (an import's renamed images), reporting whether any was. A
// ref is "[image <name>]" (the server's refs package); names are hex, so
// a ref reads the same in JSON.
func RenameRefs(msg json.RawMessage, renamed map[string]string) (json.RawMessage, bool) {
	changed := false
	for from, to := range renamed {
		ref := []byte("[image " + from + "]")
		if bytes.Contains(msg, ref) {
			msg = bytes.ReplaceAll(msg, ref, []byte("[image "+to+"]"))
			changed = true
		}
	}
	return msg, changed
}
