// Package offline is a model.Model for local use with no key and no
// network: it answers a compactor call with an extract of the source,
// deterministically, and marks every line as not a model's summary.
package offline

import (
	"context"
	"errors"
	"strings"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/textcut"
)

// Marker starts every line, so a reader knows no model wrote it.
const Marker = "[offline extract]"

// Limit is the most bytes of a line, the compactor's default.
const Limit = 512

const (
	ellipsis  = " …"
	separator = " | "
)

// Model extracts instead of summarizing. It takes no images.
type Model struct{}

var _ model.Model = Model{}

// New returns the offline model.
func New() Model { return Model{} }

// Name is "offline".
func (Model) Name() string { return "offline" }

// Capabilities: text only.
func (Model) Capabilities() model.Capabilities { return model.Capabilities{} }

// errNoInput: the request carries no <input> block to extract from.
var errNoInput = errors.New("offline: the request has no <input>...</input> block")

// Complete answers with Extract of the request's <input> block.
func (Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, model.TransportError(err)
	}
	source, ok := input(req)
	if !ok {
		return model.Response{}, &model.Error{Err: errNoInput}
	}
	return model.Response{Text: Extract(source, Limit)}, nil
}

// input finds the source of the first user message: the text between
// the last "<input>\n" and the "\n</input>" after it.
func input(req model.Request) (string, bool) {
	for _, msg := range req.Messages {
		if msg.Role != "user" {
			continue
		}
		for i := len(msg.Parts) - 1; i >= 0; i-- {
			p := msg.Parts[i]
			if p.Image != nil || p.Prefix {
				continue
			}
			start := strings.LastIndex(p.Text, "<input>\n")
			if start < 0 {
				continue
			}
			rest := p.Text[start+len("<input>\n"):]
			end := strings.LastIndex(rest, "\n</input>")
			if end < 0 {
				continue
			}
			return rest[:end], true
		}
		return "", false
	}
	return "", false
}

// Extract fits source into at most limit bytes, starting with Marker.
// Whitespace runs become one space. A source made of earlier extracts (a
// merge) shares the room between them, so each keeps its beginning. Image
// refs cut from the text are kept at the end of their piece while they
// fit, so the agent can still zoom them.
func Extract(source string, limit int) string {
	text := strings.Join(strings.Fields(source), " ")
	var pieces []string
	for _, p := range strings.Split(text, Marker) {
		if p = strings.TrimSpace(p); p != "" {
			pieces = append(pieces, p)
		}
	}
	budget := limit - len(Marker) - 1 - len(separator)*max(len(pieces)-1, 0)
	if len(pieces) == 0 || budget <= 0 {
		return Marker
	}
	shares := share(pieces, budget)
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = fit(p, shares[i])
	}
	return Marker + " " + strings.Join(out, separator)
}

// share splits budget between pieces: equal shares, with what short
// pieces do not need handed to the longer ones.
func share(pieces []string, budget int) []int {
	shares := make([]int, len(pieces))
	open := len(pieces)
	left := budget
	done := make([]bool, len(pieces))
	for open > 0 {
		each := left / open
		changed := false
		for i, p := range pieces {
			if !done[i] && len(p) <= each {
				shares[i], done[i] = len(p), true
				left -= len(p)
				open--
				changed = true
			}
		}
		if !changed {
			for i := range pieces {
				if !done[i] {
					shares[i] = each
				}
			}
			break
		}
	}
	return shares
}

// fit cuts text to n bytes at a word boundary, marking the cut, and keeps
// the image refs the cut removed when they fit.
func fit(text string, n int) string {
	if len(text) <= n {
		return text
	}
	var kept []string
	room := n - len(ellipsis)
	var tail string
	for _, name := range refs.Names(text) {
		ref := refs.Ref(name)
		if room-len(tail)-len(ref)-1 < n/2 {
			break
		}
		kept = append(kept, ref)
		tail = " " + strings.Join(kept, " ")
	}
	head := cut(text, room-len(tail))
	// Drop refs the head already holds whole, and a ref the cut split.
	if i := strings.LastIndex(head, "[image "); i >= 0 && !strings.Contains(head[i:], "]") {
		head = strings.TrimSpace(head[:i])
	}
	var missing []string
	for _, ref := range kept {
		if !strings.Contains(head, ref) {
			missing = append(missing, ref)
		}
	}
	out := head + ellipsis
	if len(missing) > 0 {
		out += " " + strings.Join(missing, " ")
	}
	return out
}

// cut returns at most n bytes of s, at the last space when there is one in
// the second half, never inside a character.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = textcut.Head(s, n)
	if i := strings.LastIndexByte(s, ' '); i > n/2 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
