// Package importfile reads the files durachat imports into a chat: its
// own exports (JSONL of {"seq", "message"}) and pi coding-agent session
// files (JSONL of typed entries, a tree since version 2). It lives in the
// Go client's module, which depends on the standard library only, and the
// server imports it from there: one parser for the client, the CLI and the
// import route.
package importfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// Parse reads an export, or a pi coding-agent session file (pi 0.73 and
// 1.x), into the pi messages to log and the images an export carries, in
// order. A session is a tree (v2 and later: each entry names its parent);
// its messages are those on the path to its last entry, the branch the
// session ended on. What it does not log is counted in skipped by kind:
// an entry of another branch as "off-branch", a message entry whose role
// durachat does not log as "message/<role>" (pi 1.x's system messages,
// its bash executions, custom messages, branch and compaction
// summaries), any other entry or line by its type (model and
// thinking-level changes, custom entries and messages, compactions,
// branch summaries, labels).
//
// A file in the format of another host (a Codex CLI rollout, a Claude
// Code session) is a *FormatError, and so is a file no line of which is
// an export's or a pi session's: never a file read as holding nothing.
func Parse(r io.Reader) (items []Item, skipped Skipped, err error) {
	lines, tree, err := readLines(r)
	if err != nil {
		return nil, nil, err
	}
	if err := detect(lines); err != nil {
		return nil, nil, err
	}
	skipped = Skipped{}
	if tree {
		items, err = sessionBranch(lines, skipped)
		return items, skipped, err
	}
	for _, l := range lines {
		switch {
		case l.keep():
			items = append(items, l.item())
		case l.Type == "message" && len(l.Message) > 0:
			skipped.add("message/" + l.role())
		case len(l.Image) > 0 && l.Type == "" && l.Seq == nil:
			items = append(items, Item{Line: l.n, Image: l.Image})
		case len(l.Piece) > 0 && l.Type == "" && l.Seq == nil:
			items = append(items, Item{Line: l.n, Piece: l.Piece})
		case l.Type != "session":
			skipped.add(l.kind())
		}
	}
	return items, skipped, nil
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
	return "the file is " + e.Found + "; durachat imports its own exports and pi session files"
}

// Lines of other hosts' session files, by what tells them apart: a Codex
// CLI rollout line is {"timestamp", "type", "payload"} with one of these
// types (codex-rs/protocol's RolloutLine; rollouts before it held the
// response items themselves, one a line); a Claude Code session line
// carries "uuid" and "sessionId" (user, assistant and system lines) or is
// a summary naming its "leafUuid" or a file-history snapshot.
var (
	codexLine = map[string]bool{"session_meta": true, "response_item": true, "event_msg": true, "turn_context": true, "compacted": true}
	codexItem = map[string]bool{"function_call": true, "function_call_output": true, "local_shell_call": true, "reasoning": true,
		"custom_tool_call": true, "custom_tool_call_output": true, "web_search_call": true}
	// piEntry are the types of a pi session's lines (pi 0.73 and 1.x).
	piEntry = map[string]bool{"session": true, "message": true, "thinking_level_change": true, "model_change": true, "usage": true,
		"compaction": true, "branch_summary": true, "custom": true, "custom_message": true, "context_edit": true, "label": true, "session_info": true}
)

// detect refuses a file of another host's format, or one none of whose
// lines is an export's or a pi session's.
func detect(lines []line) error {
	known := false
	for _, l := range lines {
		switch {
		case l.codex():
			return &FormatError{Line: l.n, Found: fmt.Sprintf("a Codex CLI rollout (a %q line): not supported yet", l.Type)}
		case l.claudeCode():
			return &FormatError{Line: l.n, Found: fmt.Sprintf("a Claude Code session (a %q line): not supported yet", l.Type)}
		case l.readable():
			known = true
		}
	}
	if known || len(lines) == 0 {
		return nil
	}
	return &FormatError{Line: lines[0].n, Found: "in no format durachat reads (lines of type " + kindsOf(lines) + ")"}
}

// codex reports whether the line is a Codex CLI rollout's: a
// {timestamp, type, payload} line, or an older bare response item.
func (l line) codex() bool {
	return l.Payload != nil && codexLine[l.Type] ||
		l.Type == "message" && l.Message == nil && l.Role != "" ||
		codexItem[l.Type] && l.Message == nil
}

// claudeCode reports whether the line is a Claude Code session's.
func (l line) claudeCode() bool {
	return l.UUID != "" && l.SessionID != "" || l.LeafUUID != "" || l.Type == "file-history-snapshot"
}

// readable reports whether the line is an export's or a pi session's.
func (l line) readable() bool {
	return l.Seq != nil || l.Type == "" && (len(l.Image) > 0 || len(l.Piece) > 0) || piEntry[l.Type]
}

// kindsOf names the first three kinds of line the file holds, quoted.
func kindsOf(lines []line) string {
	var found []string
	seen := map[string]bool{}
	for _, l := range lines {
		if k := l.kind(); !seen[k] && len(found) < 3 {
			seen[k] = true
			found = append(found, strconv.Quote(k))
		}
	}
	return strings.Join(found, ", ")
}

// line is one line of an export or a session file.
type line struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	ParentID *string         `json:"parentId"`
	Seq      *int64          `json:"seq"`
	Message  json.RawMessage `json:"message"`
	Image    json.RawMessage `json:"image"`
	Piece    json.RawMessage `json:"piece"`
	// What tells other hosts' files apart (detect).
	Payload   *struct{} `json:"payload"`
	Role      string    `json:"role"`
	UUID      string    `json:"uuid"`
	SessionID string    `json:"sessionId"`
	LeafUUID  string    `json:"leafUuid"`
	n         int
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

func (l line) item() Item { return Item{Line: l.n, Message: l.Message} }

// readLines reads the file's non-blank lines, each a JSON object, and
// reports whether they form a session tree (entries naming their parents).
func readLines(r io.Reader) (lines []line, tree bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, false, fmt.Errorf("line %d is not a JSON object: %w", n, err)
		}
		l.Message = append(json.RawMessage(nil), l.Message...)
		l.Image = append(json.RawMessage(nil), l.Image...)
		l.Piece = append(json.RawMessage(nil), l.Piece...)
		l.n = n
		if l.ParentID != nil || (l.ID != "" && l.Type != "session") {
			tree = true
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("reading line %d: %w", n+1, err)
	}
	return lines, tree, nil
}

// sessionBranch is Parse of a session tree: the messages on the path from
// its root to its last entry, every entry off that path skipped.
func sessionBranch(lines []line, skipped Skipped) (items []Item, err error) {
	path, err := branchPath(lines)
	if err != nil {
		return nil, err
	}
	on := map[string]bool{}
	for _, l := range path {
		on[l.ID] = true
	}
	for _, l := range lines {
		if !on[l.ID] && l.Type != "session" {
			skipped.add("off-branch")
		}
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].keep() {
			items = append(items, path[i].item())
		} else if path[i].Type != "session" {
			skipped.add(path[i].kind())
		}
	}
	return items, nil
}

// branchPath follows the parents from the last entry back to the root:
// the path it returns is last entry first.
func branchPath(lines []line) ([]line, error) {
	byID := map[string]int{}
	for i, l := range lines {
		if l.ID != "" {
			byID[l.ID] = i
		}
	}
	var path []line
	for i := len(lines) - 1; i >= 0; {
		l := lines[i]
		path = append(path, l)
		if l.ParentID == nil || *l.ParentID == "" {
			break
		}
		p, ok := byID[*l.ParentID]
		if !ok || p >= i {
			return nil, fmt.Errorf("session entry %q names a parent %q that does not come before it", l.ID, *l.ParentID)
		}
		i = p
	}
	return path, nil
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
