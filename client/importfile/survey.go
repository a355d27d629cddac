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

// MaxLine bounds one line of a file to import.
const MaxLine = 64 << 20

// format is the format of a file to import.
type format int

const (
	formatPi format = iota // a durachat export or a pi session file
	formatCodex
	formatClaude
)

// survey is what the first reading of a file learns: its format, and for
// a session tree the lines of the branch it ended on.
type survey struct {
	format format
	tree   bool
	// on holds the lines on the branch (a tree's); nil for a file read
	// whole.
	on map[int]bool
	// file names the file: Place.File.
	file string
}

// entries are a tree's entries by line: each one's id and parent.
type entries struct {
	byID   map[string]int
	parent map[int]string
	// The line the branch ends on: a pi session's last entry, a Claude
	// Code session's last line of its conversation.
	lastPi, lastClaude int
}

func (e *entries) add(l line, id string, parent *string) {
	if id != "" {
		e.byID[id] = l.n
	}
	if parent != nil && *parent != "" {
		e.parent[l.n] = *parent
	}
}

// surveyFile reads the file once, learning its format, and for a tree the
// lines on the branch it ended on. A file in no format durachat reads is a
// *FormatError.
func surveyFile(open func() (io.ReadCloser, error)) (*survey, error) {
	s := &survey{}
	e := &entries{byID: map[string]int{}, parent: map[int]string{}}
	decided, n, first := false, 0, 0
	seen := map[string]bool{}
	var kinds []string
	err := eachLine(open, func(l line) error {
		n++
		if first == 0 {
			first = l.n
			sum := sha256.Sum256(l.raw)
			s.file = hex.EncodeToString(sum[:16])
		}
		if k := l.kind(); !seen[k] && len(kinds) < 3 {
			seen[k] = true
			kinds = append(kinds, fmt.Sprintf("%q", k))
		}
		if !decided {
			decided = s.decide(l)
		}
		s.note(e, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !decided && n > 0 {
		return nil, &FormatError{Line: first, Found: "in no format durachat reads (lines of type " + joinComma(kinds) + ")"}
	}
	if s.tree {
		if s.on, err = e.branch(s.format == formatClaude); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// decide sets the file's format from a line that tells, reporting
// whether it did.
func (s *survey) decide(l line) bool {
	switch {
	case l.codex():
		s.format = formatCodex
	case l.claudeCode():
		s.format = formatClaude
	case l.readable():
		s.format = formatPi
	default:
		return false
	}
	return true
}

// note records the line's place in the tree, if it has one.
func (s *survey) note(e *entries, l line) {
	switch {
	case l.claudeCode():
		// A Claude Code line: its parent, or across a compaction the
		// line before it. The branch ends on the last line of the
		// conversation, not of a sidechain.
		parent := l.ParentUUID
		if (parent == nil || *parent == "") && l.LogicalParentUUID != "" {
			parent = &l.LogicalParentUUID
		}
		e.add(l, l.UUID, parent)
		if !l.IsSidechain && (l.Type == "user" || l.Type == "assistant") {
			e.lastClaude = l.n
		}
		s.tree = true
	case l.codex():
	default:
		e.add(l, l.ID, l.ParentID)
		e.lastPi = l.n
		if l.ParentID != nil || (l.ID != "" && l.Type != "session") {
			s.tree = true
		}
	}
}

// branch follows the parents from the last entry back to the root and
// returns the lines on the way. A parent that does not come before its
// child is an error, but in a Claude Code session (lenient), whose first
// line may name the last of the session it was resumed from: the branch
// starts there.
func (e *entries) branch(lenient bool) (map[int]bool, error) {
	on := map[int]bool{}
	last := e.lastPi
	if lenient {
		last = e.lastClaude
	}
	for i := last; i > 0; {
		on[i] = true
		p, ok := e.parent[i]
		if !ok {
			break
		}
		j, ok := e.byID[p]
		if !ok || j >= i {
			if lenient {
				break
			}
			return nil, fmt.Errorf("session entry of line %d names a parent %q that does not come before it", i, p)
		}
		i = j
	}
	return on, nil
}

// eachLine reads the file's non-blank lines, each a JSON object, one at a
// time.
func eachLine(open func() (io.ReadCloser, error), f func(line) error) error {
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	n, end := 0, int64(0)
	for sc.Scan() {
		n++
		end += int64(len(sc.Bytes())) + 1
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("line %d is not a JSON object: %w", n, err)
		}
		l.n, l.raw, l.end = n, raw, end
		if err := f(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading line %d: %w", n+1, err)
	}
	return nil
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// emitter turns the lines of a file into items, as its format reads.
type emitter interface {
	line(l line) error
	// end is called after the last line.
	end() error
}

func (s *survey) emitter(skipped Skipped, emit func(Item) error) emitter {
	switch s.format {
	case formatCodex:
		return &codexReader{skipped: skipped, emit: emit, names: map[string]string{}}
	case formatClaude:
		return &claudeReader{skipped: skipped, emit: emit, on: s.on, names: map[string]string{}}
	}
	return &piReader{skipped: skipped, emit: emit, on: s.on}
}

// piReader reads an export or a pi session file.
type piReader struct {
	skipped Skipped
	emit    func(Item) error
	on      map[int]bool
}

func (r *piReader) line(l line) error {
	switch {
	case r.on != nil && !r.on[l.n]:
		if l.Type != "session" {
			r.skipped.add("off-branch")
		}
	case l.keep():
		return r.emit(l.item())
	case l.Type == "message" && len(l.Message) > 0:
		r.skipped.add("message/" + l.role())
	case r.on == nil && l.exportLine():
		it := Item{Line: l.n, Image: l.Image, End: l.end}
		if len(l.Image) == 0 {
			it.Piece = l.Piece
		}
		return r.emit(it)
	case l.Type != "session":
		r.skipped.add(l.kind())
	}
	return nil
}

// exportLine reports whether the line is an export's image line or a
// piece of a line too large for one request.
func (l line) exportLine() bool {
	return (len(l.Image) > 0 || len(l.Piece) > 0) && l.Type == "" && l.Seq == nil
}

func (r *piReader) end() error { return nil }
