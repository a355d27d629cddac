package compactor_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
)

// describer answers a leaf with line, plus a description line for every
// image the task asks to describe.
func describer(line string) func(int, model.Request) (model.Response, error) {
	return func(_ int, req model.Request) (model.Response, error) {
		text := line
		task := req.Messages[0].Parts[1].Text
		if _, list, ok := strings.Cut(task, "for each of: "); ok {
			list, _, _ = strings.Cut(list, "\n")
			for _, name := range refs.Names(list) {
				text += "\ndescription of " + refs.Ref(name) + ": what " + name + " shows"
			}
		}
		return model.Response{Text: text}, nil
	}
}

func TestNothingToDescribeLeavesTheTaskAsItWas(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	source := "user: look " + refOf(a)
	without := &scripted{caps: vision, answer: describer("a line")}
	with := &scripted{caps: vision, answer: describer("a line")}
	plain := imageLeaf(source, a)
	asked := imageLeaf(source, a)
	asked.Describe = []string{a.Name}
	outPlain, err := compactor.New(without, compactor.Options{}).Compact(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	outAsked, err := compactor.New(with, compactor.Options{}).Compact(context.Background(), asked)
	if err != nil {
		t.Fatal(err)
	}
	taskPlain := without.calls()[0].Messages[0].Parts[1].Text
	taskAsked := with.calls()[0].Messages[0].Parts[1].Text
	if !strings.HasSuffix(taskPlain, "Answer with the line only.") || strings.Contains(taskPlain, "description of") {
		t.Fatalf("a leaf with nothing to describe got a changed task: %q", taskPlain)
	}
	if !strings.HasPrefix(taskAsked, strings.TrimSuffix(taskPlain, "Answer with the line only.")) {
		t.Fatalf("asking for descriptions changed the task before its end:\n%q\n%q", taskPlain, taskAsked)
	}
	if outPlain.Line != "a line" || outAsked.Line != "a line" || outPlain.Descriptions != nil {
		t.Fatalf("lines %q and %q, descriptions %q", outPlain.Line, outAsked.Line, outPlain.Descriptions)
	}
	if got := outAsked.Descriptions[a.Name]; got != "what "+a.Name+" shows" || len(with.calls()) != 1 {
		t.Fatalf("description %q after %d calls, want it from the leaf call", got, len(with.calls()))
	}
}

func TestOnlyImagesTheModelSeesAreDescribed(t *testing.T) {
	a, b := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 10, 10, blue))
	// A description line for an image not asked for is part of the line.
	stray := "a line\ndescription of " + refOf(b) + ": made up"
	tests := []struct {
		name     string
		caps     model.Capabilities
		describe []string
		wantLine string
		wantDesc map[string]string
		asked    int
	}{
		{"text-only model", model.Capabilities{}, []string{a.Name, b.Name}, "a line description of " + refOf(b) + ": made up", nil, 0},
		{"one image past the provider's count", model.Capabilities{Images: true, MaxImages: 1}, []string{a.Name, b.Name}, "a line description of " + refOf(b) + ": made up", nil, 1},
		{"only b was asked", vision, []string{b.Name}, "a line", map[string]string{b.Name: "made up"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{caps: tt.caps, answer: replies(stray, stray, stray, stray, stray)}
			in := imageLeaf(long(900)+" "+refOf(a)+" "+refOf(b), a, b)
			in.Describe = tt.describe
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if out.Line != tt.wantLine || fmt.Sprint(out.Descriptions) != fmt.Sprint(tt.wantDesc) || out.DescribeAsked != tt.asked {
				t.Fatalf("line %q, descriptions %q, asked %d", out.Line, out.Descriptions, out.DescribeAsked)
			}
		})
	}
}

func TestDescriptionsAskedAgainAtMostUntilTheAttemptsRunOut(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: vision, answer: replies("a line", "nothing", "still nothing")}
	in := imageLeaf("user: look "+refOf(a), a)
	in.Describe = []string{a.Name}
	out, err := compactor.New(m, compactor.Options{Attempts: 3}).Compact(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Line != "a line" || out.Descriptions != nil || out.Attempts != 3 || len(m.calls()) != 3 {
		t.Fatalf("out %+v after %d calls", out, len(m.calls()))
	}
}

// BenchmarkDescriptionCost measures what describing costs per image: the
// model calls and the input tokens (estimated: a token per 4 bytes of
// text, images as Anthropic counts them) of building leaves that each
// show two images, without descriptions and with the leaf call yielding
// them, against a model that describes what it is asked to.
func BenchmarkDescriptionCost(b *testing.B) {
	imgs := []model.Image{named("a", pngOf(b, 640, 480, red)), named("b", pngOf(b, 1024, 768, green))}
	source := "user: the login fails, see " + refOf(imgs[0]) + " and the console " + refOf(imgs[1])
	for _, describe := range []bool{false, true} {
		b.Run(fmt.Sprintf("describe=%v", describe), func(b *testing.B) {
			var calls, tokens int
			for b.Loop() {
				m := &scripted{caps: vision, answer: describer("a line about " + refOf(imgs[0]) + " and " + refOf(imgs[1]))}
				in := imageLeaf(source, imgs...)
				in.Context = bigView(200)
				if describe {
					in.Describe = []string{imgs[0].Name, imgs[1].Name}
				}
				if _, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				for _, req := range m.calls() {
					calls++
					tokens += inputTokens(req)
				}
			}
			per := float64(b.N * len(imgs))
			b.ReportMetric(float64(calls)/per, "calls/image")
			b.ReportMetric(float64(tokens)/per, "input-tokens/image")
		})
	}
}

// inputTokens estimates a request's input tokens.
func inputTokens(req model.Request) int {
	n := len(req.System) / 4
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			n += len(p.Text) / 4
			if p.Image != nil {
				w, h := imageSize(p.Image.Data)
				n += w * h / 750
			}
		}
	}
	return n
}

func imageSize(data []byte) (w, h int) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0
	}
	return cfg.Width, cfg.Height
}
