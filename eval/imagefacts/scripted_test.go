package imagefacts

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/model/anthropic/anthropictest"
	"github.com/durachat/durachat/shared/refs"
)

// scripted is a model behind a local Anthropic Messages API server that
// can "see" only two things: the facts of the images attached to a
// request as image blocks (read from their PNG tEXt chunk), and facts that
// appear in the text it is asked to compress (the <input> of a leaf, the
// two lines of a merge). It never reads the <chat> context, so a fact can
// only climb the tree through the lines themselves. It answers like a
// compactor: one line within the limit the task states, keeping every
// fact it saw and every [image <name>] label, and, for text alone,
// shorter than its input.
//
// Asked Question instead of a task, it answers with the facts of the
// images attached and the facts stated in the text (a description), and
// nothing else. Asked for descriptions, it writes each attached image's
// fact as its description.
//
// It also checks the wire: each image must follow the task, right after
// the [image <name>] label of the image stored under that name, and still
// carry its fact. Anything else is recorded as a problem.
type scripted struct {
	facts []Fact
	*anthropictest.Server

	mu       sync.Mutex
	problems []string
	seen     map[string]string // image name -> fact, over all requests
	// groups counts the group tasks, and groupImages those with images.
	groups, groupImages int
}

// Groups returns how many requests asked for several lines, and how many
// of those carried images.
func (s *scripted) Groups() (calls, withImages int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups, s.groupImages
}

func newScripted(t *testing.T, facts []Fact) *scripted {
	s := &scripted{facts: facts, seen: map[string]string{}}
	s.Server = anthropictest.New(t, s.reply)
	return s
}

var limitRe = regexp.MustCompile(`at most (\d+) bytes`)

func (s *scripted) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *scripted) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// Seen returns the image facts the model was shown, by image name.
func (s *scripted) Seen() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.seen))
	for k, v := range s.seen {
		out[k] = v
	}
	return out
}

type sighting struct{ name, fact string }

func (s *scripted) reply(n int, req anthropictest.Request) anthropictest.Reply {
	if len(req.Messages) != 1 {
		// The compactor asks again only when a line was not acceptable;
		// this model's first line always is.
		s.problem("request %d: a follow-up turn (%d messages): the first line was refused", n, len(req.Messages))
	}
	if len(req.Messages) == 0 {
		return anthropictest.Reply{Status: 400, ErrorType: "invalid_request_error"}
	}
	if c := req.Messages[0].Content; len(c) > 0 && c[0].Type == "text" && c[0].Text == Question {
		return anthropictest.Reply{Text: s.answer(n, c[1:])}
	}
	var (
		input, label string
		task         string
		limit        int
		taskSeen     bool
		attached     []sighting
	)
	for _, b := range req.Messages[0].Content {
		switch b.Type {
		case "text":
			label = refs.RefName(b.Text)
			if i := strings.Index(b.Text, "<input>\n"); i >= 0 && !taskSeen {
				j := strings.LastIndex(b.Text, "\n</input>")
				if j < i {
					s.problem("request %d: <input> without </input>", n)
					continue
				}
				input, task, taskSeen = b.Text[i+len("<input>\n"):j], b.Text, true
				if m := limitRe.FindStringSubmatch(b.Text); m != nil {
					limit, _ = strconv.Atoi(m[1])
				}
			}
		case "image":
			if sight, ok := s.look(n, b, label, taskSeen); ok {
				attached = append(attached, sight)
			}
			label = ""
		}
	}
	if !taskSeen || limit <= 0 {
		s.problem("request %d: no task with an <input> and a byte limit", n)
		return anthropictest.Reply{Status: 400, ErrorType: "invalid_request_error"}
	}
	var text string
	if strings.HasPrefix(task, "Write ") {
		text = s.groupLines(n, task, limit, attached)
	} else {
		text = s.line(input, limit, attached)
	}
	if _, list, ok := strings.Cut(task, "for each of: "); ok {
		list, _, _ = strings.Cut(list, "\n")
		for _, a := range attached {
			if strings.Contains(list, refs.Ref(a.name)) {
				text += "\ndescription of " + refs.Ref(a.name) + ": an image that shows " + a.fact
			}
		}
	}
	return anthropictest.Reply{Text: text}
}

// groupNode is one node of a group task: its label and its input.
var groupNode = regexp.MustCompile(`(?m)^(\d+\+\d+): (?:compress message|merge lines)[^\n]*\n<input>\n`)

// groupLines answers a group task: one line per node, under its label,
// each written as a single task's line would be from that node's input
// alone, a leaf seeing only the attached images its own input names. A
// merge over a line of the same reply reads that line as written.
func (s *scripted) groupLines(n int, task string, limit int, attached []sighting) string {
	s.mu.Lock()
	s.groups++
	if len(attached) > 0 {
		s.groupImages++
	}
	s.mu.Unlock()
	written := map[string]string{}
	var out []string
	for _, m := range groupNode.FindAllStringSubmatchIndex(task, -1) {
		label := task[m[2]:m[3]]
		rest := task[m[1]:]
		end := strings.Index(rest, "\n</input>")
		if end < 0 {
			s.problem("request %d: node %s: <input> without </input>", n, label)
			continue
		}
		input := rest[:end]
		var own []sighting
		if strings.Contains(task[m[0]:m[1]], "merge lines") {
			// "<label>|<line>" per child; a child of this reply is named.
			var lines []string
			for _, l := range strings.Split(input, "\n") {
				child, line, _ := strings.Cut(l, "|")
				if w, ok := written[child]; ok && line == "(your line "+child+" above)" {
					line = w
				}
				lines = append(lines, line)
			}
			input = strings.Join(lines, "\n")
		} else {
			for _, a := range attached {
				if strings.Contains(input, refs.Ref(a.name)) {
					own = append(own, a)
				}
			}
		}
		line := s.line(input, limit, own)
		written[label] = line
		out = append(out, label+"|"+line)
	}
	if len(out) == 0 {
		s.problem("request %d: a group task names no node", n)
	}
	return strings.Join(out, "\n")
}

// answer answers Question from what the blocks after it show: the facts
// of attached images and the facts stated in text.
func (s *scripted) answer(n int, blocks []anthropictest.Block) string {
	var facts []string
	for _, b := range blocks {
		switch {
		case b.Type == "image" && b.Source != nil:
			data, err := base64.StdEncoding.DecodeString(b.Source.Data)
			if err != nil {
				s.problem("question %d: %v", n, err)
				continue
			}
			if fact, err := ReadText(data, TextKeyword); err == nil {
				facts = append(facts, fact)
			}
		case b.Type == "text":
			for _, f := range s.facts {
				if Contains(b.Text, f.Fact) {
					facts = append(facts, f.Fact)
				}
			}
		}
	}
	if len(facts) == 0 {
		return "I cannot tell what the image shows."
	}
	return "It shows " + strings.Join(facts, "; ") + "."
}

// look reads one image block: it must follow the task and its label, be
// the image stored under that label's name, and carry a fact.
func (s *scripted) look(n int, b anthropictest.Block, label string, afterTask bool) (sighting, bool) {
	switch {
	case !afterTask:
		s.problem("request %d: an image before the task", n)
	case label == "":
		s.problem("request %d: an image not right after an [image <name>] label", n)
	case b.Source == nil:
		s.problem("request %d: image %s without a source", n, label)
	}
	if b.Source == nil || label == "" {
		return sighting{}, false
	}
	if got := images.Name(b.Source.Data); got != label {
		// Stored images are named after their base64 text; the same bytes
		// sent again have the same name. Another name means the image was
		// re-encoded on the way or sits under another image's label.
		s.problem("request %d: the image under [image %s] is stored as %s", n, label, got)
	}
	data, err := base64.StdEncoding.DecodeString(b.Source.Data)
	if err != nil {
		s.problem("request %d: image %s: %v", n, label, err)
		return sighting{}, false
	}
	fact, err := ReadText(data, TextKeyword)
	if err != nil {
		s.problem("request %d: image %s carries no fact: %v", n, label, err)
		return sighting{}, false
	}
	s.mu.Lock()
	s.seen[label] = fact
	s.mu.Unlock()
	return sighting{name: label, fact: fact}, true
}

// line writes the answer: what must be kept first (each attached image's
// label with its fact, the other labels, the facts in the text), then as
// much of the input as fits. With images the budget is the limit; for text
// alone, two thirds of the input, so the line always shrinks its source.
func (s *scripted) line(input string, limit int, attached []sighting) string {
	var keep []string
	labelled := map[string]bool{}
	for _, a := range attached {
		keep = append(keep, refs.Ref(a.name)+" shows "+a.fact)
		labelled[a.name] = true
	}
	for _, name := range refs.Names(input) {
		if !labelled[name] {
			keep = append(keep, refs.Ref(name))
		}
	}
	for _, f := range s.facts {
		if Contains(input, f.Fact) && !containsAny(keep, f.Fact) {
			keep = append(keep, f.Fact)
		}
	}
	budget := limit
	if len(attached) == 0 {
		budget = min(limit, len(input)*2/3)
	}
	line := strings.Join(keep, "; ")
	var words []string
	for _, w := range strings.Fields(refsOut.ReplaceAllString(input, " ")) {
		if strings.Trim(w, ";") != "" {
			words = append(words, w)
		}
	}
	gist := strings.Join(words, " ")
	room := budget - len(line) - len("; ")
	if line == "" {
		room = budget
	}
	if room > 0 && gist != "" {
		if len(gist) > room {
			gist = strings.TrimSpace(cutBytes(gist, room))
		}
		if line != "" {
			line += "; "
		}
		line += gist
	}
	if len(line) > limit {
		s.problem("the facts and labels to keep take %d bytes, over the limit of %d: %q", len(line), limit, line)
		line = cutBytes(line, limit)
	}
	return line
}

var refsOut = regexp.MustCompile(`\[image [0-9a-f]{16}\]`)

func containsAny(parts []string, fact string) bool {
	for _, p := range parts {
		if Contains(p, fact) {
			return true
		}
	}
	return false
}

// cutBytes cuts s to at most n bytes on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
