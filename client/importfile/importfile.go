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

// Parse reads an export, or a pi coding-agent session file, into the
// pi messages to log and the images an export carries, in order. A
// session is a tree (v2 and later: each entry names its parent); its
// messages are those on the path to its last entry, the branch the
// session ended on. Lines of other types are counted as skipped.
func Parse(r io.Reader) (items []Item, skipped int, err error) {
	lines, tree, err := readLines(r)
	if err != nil {
		return nil, 0, err
	}
	if tree {
		return sessionBranch(lines)
	}
	for _, l := range lines {
		switch {
		case l.keep():
			items = append(items, l.item())
		case len(l.Image) > 0 && l.Type == "" && l.Seq == nil:
			items = append(items, Item{Line: l.n, Image: l.Image})
		case len(l.Piece) > 0 && l.Type == "" && l.Seq == nil:
			items = append(items, Item{Line: l.n, Piece: l.Piece})
		case l.Type != "session":
			skipped++
		}
	}
	return items, skipped, nil
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
	n        int
}

// keep reports whether the line is a message to log: an export's message
// line or a session's message entry.
func (l line) keep() bool {
	return (l.Seq != nil || l.Type == "message") && len(l.Message) > 0
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
func sessionBranch(lines []line) (items []Item, skipped int, err error) {
	path, err := branchPath(lines)
	if err != nil {
		return nil, 0, err
	}
	on := map[string]bool{}
	for _, l := range path {
		on[l.ID] = true
	}
	for _, l := range lines {
		if !on[l.ID] && l.Type != "session" {
			skipped++ // another branch
		}
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].keep() {
			items = append(items, path[i].item())
		} else if path[i].Type != "session" {
			skipped++
		}
	}
	return items, skipped, nil
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
