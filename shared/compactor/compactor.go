// Package compactor writes the memory's node lines with a language model:
// one message (a leaf) or two adjacent lines (a merge) into one line of at
// most Limit bytes. It implements memory.Compactor over any model.Model,
// and holds the custom compactors a host can plug in instead.
package compactor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/textcut"
)

// Numbers of the compactor call.
const (
	DefaultLimit     = 512 // bytes per line
	MaxLimit         = 640 // the largest Limit a setting may allow
	DefaultAttempts  = 5   // calls per build, in one conversation
	DefaultMaxTokens = 1024
	ImageSide        = 800 // px on the long side of an image sent to a model
)

// Options tune a Compactor. The zero value is the default.
type Options struct {
	// Limit is the most bytes a line may have: 0 means 512; at most 640.
	Limit int
	// Attempts is the most calls per build: 0 means 5.
	Attempts int
	// System replaces the default system prompt (a host may pass its agent's
	// own). It is part of the cached prefix.
	System string
	// MaxTokens caps each reply: 0 means 1024.
	MaxTokens int
	// Downscale shrinks an image before it is sent; nil means
	// images.Downscale. It is called with a long side of 800 px.
	Downscale func(data []byte, maxSide int) (mimeType string, out []byte, err error)
}

// Validate reports a setting out of range, for configuration to show.
func (o Options) Validate() error {
	switch {
	case o.Limit < 0 || o.Limit > MaxLimit:
		return fmt.Errorf("compactor: limit %d out of range: 1 to %d bytes (0 for %d)", o.Limit, MaxLimit, DefaultLimit)
	case o.Limit > 0 && o.Limit < 64:
		return fmt.Errorf("compactor: limit %d too small: at least 64 bytes", o.Limit)
	case o.Attempts < 0:
		return fmt.Errorf("compactor: attempts %d must not be negative", o.Attempts)
	case o.MaxTokens < 0:
		return fmt.Errorf("compactor: max tokens %d must not be negative", o.MaxTokens)
	}
	return nil
}

// Compactor writes lines with one model. It is safe for concurrent use.
type Compactor struct {
	model     model.Model
	limit     int
	attempts  int
	system    string
	maxTokens int
	downscale func([]byte, int) (string, []byte, error)
}

var _ memory.Compactor = (*Compactor)(nil)

// New returns a Compactor over m. Settings out of range are brought into
// range (a limit over 640 becomes 640); call Options.Validate first to
// report them instead.
func New(m model.Model, opts Options) *Compactor {
	c := &Compactor{
		model:     m,
		limit:     opts.Limit,
		attempts:  opts.Attempts,
		system:    opts.System,
		maxTokens: opts.MaxTokens,
		downscale: opts.Downscale,
	}
	switch {
	case c.limit <= 0:
		c.limit = DefaultLimit
	case c.limit < 64:
		c.limit = 64
	case c.limit > MaxLimit:
		c.limit = MaxLimit
	}
	if c.attempts <= 0 {
		c.attempts = DefaultAttempts
	}
	if c.system == "" {
		c.system = SystemPrompt
	}
	if c.maxTokens <= 0 {
		c.maxTokens = DefaultMaxTokens
	}
	if c.downscale == nil {
		c.downscale = images.Downscale
	}
	return c
}

// Limit is the most bytes a line may have.
func (c *Compactor) Limit() int { return c.limit }

// errNoText: every reply was empty.
var errNoText = errors.New("the model returned no text")

// Compact writes one node's line.
//
// A source that fits the limit is kept word for word without a call,
// unless images are attached. Otherwise the model is asked up to Attempts
// times in one conversation; the first acceptable reply wins, else the
// shortest reply, cut to the limit. An error ends the build and is
// returned classified, except that a non-retryable error with images
// attached is asked once more with names only (not counted as an attempt).
//
// The attached images that in.Describe names are also described by the
// same call: the reply carries one description line per image after the
// line (describe), and the line is read as it would be without them. An
// image the replies leave undescribed is asked for again in the same
// conversation while attempts remain; the line stands either way.
func (c *Compactor) Compact(ctx context.Context, in memory.CompactRequest) (memory.Compacted, error) {
	out := memory.Compacted{Model: c.model.Name()}
	var att []model.Image
	if in.Level == 0 {
		att, out.Skipped = c.attach(in.Images)
	}
	out.Attached = len(att)
	if len(att) == 0 && len(in.Source) <= c.limit {
		out.Line = in.Source
		out.Verbatim = true
		return out, nil
	}

	mode := noImages
	if len(att) > 0 {
		mode = withImages
	}
	describe := toDescribe(in.Describe, att)
	out.DescribeAsked = len(describe)
	descs := map[string]string{}
	req := c.request(in, att, mode, describe)
	var best string // the shortest non-empty reply so far
	for attempt := 1; attempt <= c.attempts; attempt++ {
		out.Attempts = attempt
		resp, err := c.model.Complete(ctx, req)
		if err != nil {
			err = model.Classify(err)
			if len(att) > 0 && !model.IsRetryable(err) {
				return c.namesOnly(ctx, in, out, best, err)
			}
			return out, fmt.Errorf("compactor: node %s, attempt %d: %w", in.Label, attempt, err)
		}
		addUsage(&out.Usage, resp.Usage)
		line := splitReply(resp.Text, describe, descs)
		if line != "" && (best == "" || len(line) < len(best)) {
			best = line
		}
		req.Messages = append(req.Messages, model.Message{Role: "assistant", Parts: []model.Part{{Text: nonEmpty(resp.Text)}}})
		if c.accepts(line, in.Source, len(att) > 0) {
			out.Line = line
			c.askMissing(ctx, req, &out, describe, descs)
			return out, nil
		}
		req.Messages = append(req.Messages, model.Message{Role: "user", Parts: []model.Part{{Text: c.followUp(line, in.Source)}}})
	}
	if best == "" {
		return out, fmt.Errorf("compactor: node %s: %w", in.Label,
			&model.Error{Retryable: true, Err: fmt.Errorf("%w after %d attempts", errNoText, c.attempts)})
	}
	out.Line = textcut.Head(best, c.limit)
	out.Descriptions = nonEmptyMap(descs)
	return out, nil
}

// toDescribe lists the attached images that want a description, in the
// order they are attached: only an image the model sees can be described.
func toDescribe(want []string, att []model.Image) []string {
	if len(want) == 0 {
		return nil
	}
	var out []string
	for _, img := range att {
		if slices.Contains(want, img.Name) {
			out = append(out, img.Name)
		}
	}
	return out
}

// askMissing asks, in the conversation req that ended with an accepted
// line, for the descriptions the replies left out, while attempts remain.
// The line is not asked again; an error ends the asking and leaves those
// images undescribed (a later leaf naming them asks again).
func (c *Compactor) askMissing(ctx context.Context, req model.Request, out *memory.Compacted, describe []string, descs map[string]string) {
	for out.Attempts < c.attempts {
		var missing []string
		for _, name := range describe {
			if descs[name] == "" {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			break
		}
		req.Messages = append(req.Messages, model.Message{Role: "user", Parts: []model.Part{{Text: missingDescriptions(missing)}}})
		out.Attempts++
		resp, err := c.model.Complete(ctx, req)
		if err != nil {
			break
		}
		addUsage(&out.Usage, resp.Usage)
		splitReply(resp.Text, missing, descs)
		req.Messages = append(req.Messages, model.Message{Role: "assistant", Parts: []model.Part{{Text: nonEmpty(resp.Text)}}})
	}
	out.Descriptions = nonEmptyMap(descs)
}

// descriptionLine is one description line of a reply: "description of
// [image <name>]: <text>".
var descriptionLine = regexp.MustCompile(`(?i)^\s*description of \[image ([0-9a-f]{16})\]\s*:\s*(.*)$`)

// splitReply reads a reply as its line and, for the names in describe,
// description lines: each description line found is put in descs (the
// first one for a name wins) and left out of the line. Without names to
// describe the reply is all line, read as it always was (clean).
func splitReply(text string, describe []string, descs map[string]string) string {
	if len(describe) == 0 {
		return clean(text)
	}
	var rest []string
	for _, l := range strings.Split(text, "\n") {
		m := descriptionLine.FindStringSubmatch(l)
		if m == nil || !slices.Contains(describe, m[1]) {
			rest = append(rest, l)
			continue
		}
		if d := images.CleanDescription(m[2]); d != "" && descs[m[1]] == "" {
			descs[m[1]] = d
		}
	}
	return clean(strings.Join(rest, "\n"))
}

func nonEmptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// namesOnly asks once more without the images after a non-retryable error
// with images attached. If the images were the problem this call works: a
// short message stays word for word, a long one takes the line. If not,
// its error is returned and the leaf is built later with its images.
func (c *Compactor) namesOnly(ctx context.Context, in memory.CompactRequest, out memory.Compacted, best string, cause error) (memory.Compacted, error) {
	resp, err := c.model.Complete(ctx, c.request(in, nil, namesOnly, nil))
	if err != nil {
		return out, fmt.Errorf("compactor: node %s: names-only call after an error with images (%v): %w",
			in.Label, cause, model.Classify(err))
	}
	addUsage(&out.Usage, resp.Usage)
	out.NamesOnly = true
	if len(in.Source) <= c.limit {
		out.Line = in.Source
		out.Verbatim = true
		return out, nil
	}
	line := clean(resp.Text)
	if c.accepts(line, in.Source, false) {
		out.Line = line
		return out, nil
	}
	if line != "" && (best == "" || len(line) < len(best)) {
		best = line
	}
	if best == "" {
		return out, fmt.Errorf("compactor: node %s: names-only call: %w", in.Label,
			&model.Error{Retryable: true, Err: errNoText})
	}
	out.Line = textcut.Head(best, c.limit)
	return out, nil
}

// accepts: a line fits the limit and, unless it is about images, is
// smaller than its source.
func (c *Compactor) accepts(line, source string, withImages bool) bool {
	return line != "" && len(line) <= c.limit && (withImages || len(line) < len(source))
}

func (c *Compactor) followUp(line, source string) string {
	if line == "" {
		return emptyReply(c.limit)
	}
	return tooLong(line, c.limit, len(source))
}

// request builds the first call: the system prompt, then one user message
// whose first part is the compaction view (the cacheable prefix, identical
// with or without images) and whose second is the task (asking for the
// descriptions of describe too); attached images follow, each right after
// its label.
func (c *Compactor) request(in memory.CompactRequest, att []model.Image, mode imageMode, describe []string) model.Request {
	view := in.Context
	if view == "" {
		view = emptyChat
	}
	var task string
	if in.Level == 0 {
		if mode == namesOnly && len(refs.Names(in.Source)) == 0 {
			mode = noImages
		}
		task = leafTask(in, c.limit, mode, describe)
	} else {
		a, b := childLabels(in.Level, in.Index)
		task = mergeTask(a, b, in.Label, in.Source, c.limit)
	}
	parts := make([]model.Part, 0, 2+2*len(att))
	parts = append(parts, model.Part{Text: view, Prefix: true}, model.Part{Text: task})
	for i := range att {
		parts = append(parts, model.Part{Text: refs.Ref(att[i].Name)}, model.Part{Image: &att[i]})
	}
	return model.Request{
		System:    c.system,
		Messages:  []model.Message{{Role: "user", Parts: parts}},
		MaxTokens: c.maxTokens,
	}
}

// attach picks the images the model may see, downscaled, in the order they
// are named. An image the model cannot take (no image input, a format it
// does not read, over its size or count limit) is skipped: its name stays
// only in the source text, and no other image takes its label.
func (c *Compactor) attach(imgs []model.Image) (att []model.Image, skipped int) {
	caps := c.model.Capabilities()
	if !caps.Images || caps.MaxImages <= 0 {
		return nil, len(imgs)
	}
	seen := make(map[string]bool, len(imgs))
	for _, img := range imgs {
		if len(att) >= caps.MaxImages || seen[img.Name] || !refs.ValidName(img.Name) {
			skipped++
			continue
		}
		mimeType, data, err := c.downscale(img.Data, ImageSide)
		if err != nil || !sendable(mimeType) || len(data) == 0 ||
			(caps.MaxImageBytes > 0 && len(data) > caps.MaxImageBytes) {
			skipped++
			continue
		}
		seen[img.Name] = true
		att = append(att, model.Image{Name: img.Name, MimeType: mimeType, Data: data})
	}
	return att, skipped
}

func sendable(mimeType string) bool {
	switch mimeType {
	case images.PNG, images.JPEG, images.GIF, images.WebP:
		return true
	}
	return false
}

// childLabels are the labels of a merge's two children.
func childLabels(level int, index int64) (a, b string) {
	half := int64(1) << (level - 1)
	start := index << level
	return fmt.Sprintf("%d+%d", start, half), fmt.Sprintf("%d+%d", start+half, half)
}

var (
	head    = regexp.MustCompile(`^\d+\+\d+\|`)
	newline = regexp.MustCompile(`[\r\n]+`)
)

// clean makes a reply a line: runs of CR/LF become one space, it is
// trimmed, and a copied "<start>+<n>|" head is stripped.
func clean(text string) string {
	line := strings.TrimSpace(newline.ReplaceAllString(text, " "))
	return strings.TrimSpace(head.ReplaceAllString(line, ""))
}

// nonEmpty keeps an empty reply from becoming an empty assistant turn,
// which some providers reject.
func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

func addUsage(sum *model.Usage, u model.Usage) {
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.CacheReadTokens += u.CacheReadTokens
	sum.CacheWriteTokens += u.CacheWriteTokens
}
