package compactor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
)

// scripted is a model whose answers the test writes. It keeps every
// request it gets.
type scripted struct {
	caps   model.Capabilities
	answer func(n int, req model.Request) (model.Response, error)

	mu   sync.Mutex
	reqs []model.Request
}

func (s *scripted) Name() string                     { return "scripted:test" }
func (s *scripted) Capabilities() model.Capabilities { return s.caps }
func (s *scripted) Complete(_ context.Context, req model.Request) (model.Response, error) {
	s.mu.Lock()
	n := len(s.reqs)
	req.Messages = append([]model.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.answer(n, req)
}

func (s *scripted) calls() []model.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Request(nil), s.reqs...)
}

var vision = model.Capabilities{Images: true, MaxImages: 20, MaxImageBytes: 5 << 20}

// replies answers with the given texts in turn.
func replies(texts ...string) func(int, model.Request) (model.Response, error) {
	return func(n int, _ model.Request) (model.Response, error) {
		return model.Response{Text: texts[n], Usage: model.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
}

const view = "<chat>\n0+4|the start\n4+1|a question\n</chat>"

func leaf(source string, imgs ...model.Image) memory.CompactRequest {
	if imgs == nil {
		imgs = []model.Image{}
	}
	return memory.CompactRequest{Level: 0, Index: 5, Label: "5+1", Kind: "user", Context: view, Source: source, Images: imgs}
}

func long(n int) string { return "user: " + strings.Repeat("x", n) }

// pngOf draws a w×h PNG in one colour.
func pngOf(t testing.TB, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// named returns an image with a well-formed name derived from tag.
func named(tag string, data []byte) model.Image {
	sum := sha256.Sum256([]byte(tag))
	return model.Image{Name: hex.EncodeToString(sum[:8]), MimeType: "image/png", Data: data}
}

func refOf(img model.Image) string { return refs.Ref(img.Name) }

func TestShortSourceIsKeptWordForWordWithoutACall(t *testing.T) {
	m := &scripted{caps: vision, answer: replies()}
	c := compactor.New(m, compactor.Options{})
	for _, in := range []memory.CompactRequest{
		leaf("user: hello\nthere"),
		{Level: 1, Index: 2, Label: "4+2", Context: view, Source: "user: a\ntalk: b", Images: []model.Image{}},
		leaf(long(506)), // exactly 512 bytes
	} {
		out, err := c.Compact(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Verbatim || out.Line != in.Source || out.Attempts != 0 {
			t.Fatalf("%s: %+v, want the source word for word", in.Label, out)
		}
	}
	if len(m.calls()) != 0 {
		t.Fatal("a short source called the model")
	}
}

func TestLeafRequestHasTheViewAsPrefixThenTheTaskWithRulerAndInput(t *testing.T) {
	m := &scripted{caps: vision, answer: replies("a short line")}
	source := long(700)
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(source))
	if err != nil {
		t.Fatal(err)
	}
	if out.Line != "a short line" || out.Attempts != 1 || out.Verbatim || out.Model != "scripted:test" || out.Usage.InputTokens != 10 {
		t.Fatalf("out = %+v", out)
	}
	req := m.calls()[0]
	if req.System != compactor.SystemPrompt || len(req.Messages) != 1 || req.Messages[0].Role != "user" {
		t.Fatalf("request = %+v", req)
	}
	parts := req.Messages[0].Parts
	if len(parts) != 2 {
		t.Fatalf("%d parts, want the view and the task", len(parts))
	}
	if parts[0].Text != view || !parts[0].Prefix {
		t.Fatalf("first part = %+v, want the view marked as prefix", parts[0])
	}
	task := parts[1].Text
	if parts[1].Prefix {
		t.Fatal("the task is marked as prefix")
	}
	for _, want := range []string{
		"message 5", "5+1", "kind user", "at most 512 bytes",
		"\n" + strings.Repeat("-", 512) + "\n",
		"<input>\n" + source + "\n</input>",
		"context only", "do not copy", "do not follow",
	} {
		if !strings.Contains(task, want) {
			t.Errorf("task lacks %q", want)
		}
	}
	if strings.Contains(task, strings.Repeat("-", 513)) {
		t.Error("ruler longer than the limit")
	}
	if strings.Contains(task, "image") {
		t.Error("a text-only task mentions images")
	}
}

func TestMergeRequestNamesBothChildLines(t *testing.T) {
	m := &scripted{caps: vision, answer: replies("merged")}
	in := memory.CompactRequest{Level: 2, Index: 3, Label: "12+4", Context: view,
		Source: long(300) + "\n" + long(300), Images: []model.Image{}}
	if _, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	task := m.calls()[0].Messages[0].Parts[1].Text
	for _, want := range []string{"Merge lines 12+2 and 14+2", "adjacent", "at most 512 bytes", strings.Repeat("-", 512),
		"<input>\n" + in.Source + "\n</input>", "<chat>", "if needed", "context only"} {
		if !strings.Contains(task, want) {
			t.Errorf("merge task lacks %q:\n%s", want, task)
		}
	}
}

func TestTooLongReplyIsAskedAgainInTheSameConversation(t *testing.T) {
	first := strings.Repeat("é", 350) // 700 bytes
	m := &scripted{caps: vision, answer: replies(first, "  5+1| the right line \n")}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(900)))
	if err != nil {
		t.Fatal(err)
	}
	if out.Line != "the right line" || out.Attempts != 2 || out.Usage.InputTokens != 20 {
		t.Fatalf("out = %+v, want the second reply trimmed and without its head", out)
	}
	second := m.calls()[1]
	if len(second.Messages) != 3 || second.Messages[1].Role != "assistant" || second.Messages[1].Parts[0].Text != first ||
		second.Messages[2].Role != "user" {
		t.Fatalf("second call does not continue the conversation: %+v", second.Messages)
	}
	if second.Messages[0].Parts[0].Text != view {
		t.Fatal("the conversation lost its prefix")
	}
	follow := second.Messages[2].Parts[0].Text
	if !strings.HasPrefix(follow, "too long: 700 bytes, over the limit") {
		t.Fatalf("follow-up = %q", follow)
	}
	if !strings.Contains(follow, strings.Repeat("é", 256)+"<<<LIMIT") {
		t.Fatalf("follow-up does not show the first 512 bytes with a limit marker: %q", follow)
	}
}

func TestAfterFiveAttemptsTheShortestReplyIsKeptCutToTheLimit(t *testing.T) {
	shortest := strings.Repeat("ab ", 200) + "€" // 603 bytes
	m := &scripted{caps: vision, answer: replies(
		strings.Repeat("a", 900), strings.Repeat("b", 700), shortest, strings.Repeat("c", 800), strings.Repeat("d", 1000))}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(2000)))
	if err != nil {
		t.Fatal(err)
	}
	if out.Attempts != 5 || len(m.calls()) != 5 {
		t.Fatalf("%d attempts, %d calls; want 5", out.Attempts, len(m.calls()))
	}
	if out.Line != shortest[:512] || out.Mechanical {
		t.Fatalf("line = %q (%d bytes), want the shortest reply cut to 512", out.Line, len(out.Line))
	}
}

func TestCutToTheLimitNeverSplitsACharacter(t *testing.T) {
	reply := strings.Repeat("€", 200) // 600 bytes; 512 is inside a character
	m := &scripted{caps: vision, answer: replies(reply, reply, reply, reply, reply)}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(2000)))
	if err != nil {
		t.Fatal(err)
	}
	if out.Line != strings.Repeat("€", 170) {
		t.Fatalf("line of %d bytes: %q", len(out.Line), out.Line)
	}
}

func TestLimitSettingAllowsUpTo640Bytes(t *testing.T) {
	line := strings.Repeat("z", 600)
	m := &scripted{caps: vision, answer: replies(line)}
	out, err := compactor.New(m, compactor.Options{Limit: 640}).Compact(context.Background(), leaf(long(2000)))
	if err != nil || out.Line != line || out.Attempts != 1 {
		t.Fatalf("out = %+v, err %v", out, err)
	}
	if !strings.Contains(m.calls()[0].Messages[0].Parts[1].Text, strings.Repeat("-", 640)) {
		t.Fatal("the ruler does not follow the limit")
	}
	if c := compactor.New(m, compactor.Options{Limit: 9000}); c.Limit() != 640 {
		t.Fatalf("limit %d, want at most 640", c.Limit())
	}
	if err := (compactor.Options{Limit: 700}).Validate(); err == nil {
		t.Fatal("a 700-byte limit validates")
	}
}

func TestEmptyRepliesAreAskedAgainThenFailRetryable(t *testing.T) {
	m := &scripted{caps: vision, answer: replies("", " ", "\n", "", "")}
	_, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(900)))
	if err == nil || !model.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	last := m.calls()[4].Messages
	if last[len(last)-2].Parts[0].Text == "" || !strings.Contains(last[len(last)-1].Parts[0].Text, "empty") {
		t.Fatalf("an empty reply was not followed up: %+v", last)
	}
}

func TestAnErrorEndsTheBuildAndIsReturnedClassified(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		retryable bool
		refused   bool
	}{
		{"throttled", model.StatusError(429, errors.New("slow down")), true, false},
		{"server error", model.StatusError(500, errors.New("boom")), true, false},
		{"bad request", model.StatusError(400, errors.New("invalid")), false, false},
		{"refused", model.RefusedError(model.ErrRefused), false, true},
		{"unclassified network error", errors.New("connection reset"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{caps: vision, answer: func(n int, _ model.Request) (model.Response, error) {
				if n == 0 {
					return model.Response{Text: strings.Repeat("y", 800)}, nil
				}
				return model.Response{}, tt.err
			}}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(900)))
			if err == nil {
				t.Fatal("no error")
			}
			if model.IsRetryable(err) != tt.retryable || model.IsRefused(err) != tt.refused {
				t.Fatalf("err %v: retryable %v refused %v", err, model.IsRetryable(err), model.IsRefused(err))
			}
			if len(m.calls()) != 2 || out.Attempts != 2 || out.NamesOnly {
				t.Fatalf("%d calls, out %+v: a text-only build has no fallback", len(m.calls()), out)
			}
		})
	}
}

func TestDefaultSystemPromptCanBeReplaced(t *testing.T) {
	m := &scripted{caps: vision, answer: replies("ok line")}
	if _, err := compactor.New(m, compactor.Options{System: "the agent's own prompt"}).Compact(context.Background(), leaf(long(900))); err != nil {
		t.Fatal(err)
	}
	if m.calls()[0].System != "the agent's own prompt" {
		t.Fatal("system prompt not replaced")
	}
}
