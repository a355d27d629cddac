package compactor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
)

// leafAt is leaf i of a group, with the given source and images.
func leafAt(i int64, kind, source string, imgs ...model.Image) memory.CompactRequest {
	if imgs == nil {
		imgs = []model.Image{}
	}
	return memory.CompactRequest{Level: 0, Index: i, Label: fmt.Sprintf("%d+1", i), Kind: kind, Source: source, Images: imgs}
}

// mergeOf is merge (l, i) of a group over the given child lines ("" for a
// child the group writes).
func mergeOf(l int, i int64, a, b string) memory.CompactRequest {
	c := memory.CompactRequest{Level: l, Index: i, Label: fmt.Sprintf("%d+%d", i<<l, 1<<l), Children: [2]string{a, b}, Images: []model.Image{}}
	if a != "" && b != "" {
		c.Source = memory.MergeSource(a, b)
	}
	return c
}

func TestAGroupCallWritesOneLinePerNodeUnderItsLabel(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: vision, answer: replies("4+1|line four\n5+1| line five " + refOf(a) + "\n6+1|line\nsix")}
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{
		leafAt(4, "talk", long(700)),
		leafAt(5, "echo", "echo: shell: "+refOf(a)+" "+strings.Repeat("y", 900), a),
		leafAt(6, "talk", long(800)),
	}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"line four", "line five " + refOf(a), "line six"}
	for i, o := range outs {
		if o.Line != want[i] || o.Verbatim || o.Attempts != 1 || o.Model != "scripted:test" {
			t.Fatalf("node %d: %+v, want line %q", i, o, want[i])
		}
	}
	if outs[1].Attached != 1 || outs[0].Attached != 0 || outs[0].Usage.InputTokens != 10 || outs[1].Usage.InputTokens != 0 {
		t.Fatalf("images or usage misplaced: %+v", outs)
	}
	calls := m.calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
	req := calls[0]
	parts := req.Messages[0].Parts
	if req.System != compactor.SystemPrompt || parts[0].Text != view || !parts[0].Prefix || len(parts) != 4 {
		t.Fatalf("request parts %+v", parts)
	}
	if parts[2].Text != refOf(a) || parts[3].Image == nil || parts[3].Image.Name != a.Name {
		t.Fatal("the image does not follow the task after its label")
	}
	task := parts[1].Text
	for _, s := range []string{"Write 3 lines", strings.Repeat("-", 512) + "\n", "4+1: compress message 4 (kind talk)",
		"<input>\n" + g.Nodes[1].Source + "\n</input>", "context only", "follows its [image <name>] label", `"4+1|<the line>"`} {
		if !strings.Contains(task, s) {
			t.Errorf("task lacks %q:\n%s", s, task)
		}
	}
	if req.MaxTokens != 3*compactor.DefaultMaxTokens {
		t.Fatalf("max tokens %d", req.MaxTokens)
	}
}

func TestAGroupAsksAgainOnlyForTheLinesNotAcceptedAndLeavesOutTheOnesThatNeverAre(t *testing.T) {
	tooLong := strings.Repeat("z", 700)
	m := &scripted{caps: vision, answer: replies(
		"0+1|first\n1+1|"+tooLong, // 2+1 missing
		"1+1|second, shorter\n2+1|"+tooLong,
		"2+1|"+tooLong, "2+1|"+tooLong, "2+1|"+tooLong)}
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{leafAt(0, "talk", long(900)), leafAt(1, "talk", long(900)), leafAt(2, "talk", long(900))}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Line != "first" || outs[1].Line != "second, shorter" || outs[2].Line != "" {
		t.Fatalf("lines %q %q %q: the third, never accepted, is left to a build of its own", outs[0].Line, outs[1].Line, outs[2].Line)
	}
	calls := m.calls()
	if len(calls) != 5 {
		t.Fatalf("%d calls, want 5 attempts", len(calls))
	}
	follow := calls[1].Messages[2].Parts[0].Text
	if strings.Contains(follow, "0+1") || !strings.Contains(follow, "1+1: too long: 700 bytes, over the limit of 512") ||
		!strings.Contains(follow, strings.Repeat("z", 512)+"<<<LIMIT") || !strings.Contains(follow, "2+1: missing from the reply") {
		t.Fatalf("follow-up %q", follow)
	}
	if last := calls[2].Messages[4].Parts[0].Text; strings.Contains(last, "1+1") {
		t.Fatalf("an accepted line is asked again: %q", last)
	}
}

func TestAGroupMergeOverALineOfTheSameCallIsJudgedAgainstThatLine(t *testing.T) {
	stored := strings.Repeat("s", 300)
	// 4+2 is written by the call; 4+4 merges it and the stored 6+2.
	m := &scripted{caps: vision, answer: replies("4+2|the new pair\n4+4|" + strings.Repeat("p", 320))}
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{
		mergeOf(1, 2, strings.Repeat("a", 300), strings.Repeat("b", 300)),
		mergeOf(2, 1, "", stored),
	}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	// 4+4's source is "the new pair" and the stored line: 313 bytes, so it
	// is kept word for word, whatever the model wrote for it.
	if outs[0].Line != "the new pair" || outs[1].Line != "the new pair\n"+stored || !outs[1].Verbatim {
		t.Fatalf("outs %+v", outs)
	}
	task := m.calls()[0].Messages[0].Parts[1].Text
	if !strings.Contains(task, "4+4: merge lines 4+2 and 6+2") || !strings.Contains(task, "4+2|(your line 4+2 above)") ||
		!strings.Contains(task, "6+2|"+stored) || !strings.Contains(task, "Take details from the <chat> block") {
		t.Fatalf("task:\n%s", task)
	}

	// When the merged line is not accepted, the merge over it is asked again too.
	m = &scripted{caps: vision, answer: replies(
		"4+2|"+strings.Repeat("x", 600)+"\n4+4|"+strings.Repeat("q", 100),
		"4+2|"+strings.Repeat("n", 400)+"\n4+4|"+strings.Repeat("r", 200))}
	outs, err = compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Line != strings.Repeat("n", 400) || outs[1].Line != strings.Repeat("r", 200) || outs[1].Verbatim {
		t.Fatalf("outs %+v", outs)
	}
	if follow := m.calls()[1].Messages[2].Parts[0].Text; !strings.Contains(follow, "4+4: its input changes") {
		t.Fatalf("follow-up %q", follow)
	}
}

func TestAGroupLeavesOutALeafWhoseImagesDoNotFitTheRequest(t *testing.T) {
	a, b, c := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 10, 10, blue)), named("c", pngOf(t, 12, 10, blue))
	m := &scripted{caps: model.Capabilities{Images: true, MaxImages: 2}, answer: replies("0+1|zero " + refOf(a) + "\n2+1|two " + refOf(a))}
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{
		leafAt(0, "user", "user: "+refOf(a)+" "+refOf(b), a, b),
		leafAt(1, "user", "user: "+refOf(c), c),
		leafAt(2, "user", "user: again "+refOf(a), a), // already attached: takes no room
	}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Line == "" || outs[1].Line != "" || outs[2].Line == "" || outs[2].Attached != 1 {
		t.Fatalf("outs %+v", outs)
	}
	parts := m.calls()[0].Messages[0].Parts
	images := 0
	for _, p := range parts {
		if p.Image != nil {
			images++
		}
	}
	if images != 2 || strings.Contains(parts[1].Text, "1+1") {
		t.Fatalf("%d images sent, task %q", images, parts[1].Text)
	}
}

func TestAGroupReplyWithNoLabelledLineIsNotAskedAgain(t *testing.T) {
	m := &scripted{caps: vision, answer: replies("one summary of everything")}
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{leafAt(0, "talk", long(900)), leafAt(1, "talk", long(900))}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil || outs[0].Line != "" || outs[1].Line != "" || len(m.calls()) != 1 {
		t.Fatalf("outs %+v, err %v, %d calls: want every node left to its own build after one call", outs, err, len(m.calls()))
	}
}

func TestAGroupErrorOnTheFirstCallIsReturnedClassifiedAndOnAFollowUpKeepsTheAcceptedLines(t *testing.T) {
	g := memory.Group{Context: view, Nodes: []memory.CompactRequest{leafAt(0, "talk", long(900)), leafAt(1, "talk", long(900))}}
	m := &scripted{caps: vision, answer: func(int, model.Request) (model.Response, error) {
		return model.Response{}, model.StatusError(429, fmt.Errorf("slow down"))
	}}
	if _, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g); err == nil || !model.IsRetryable(err) {
		t.Fatalf("err %v, want retryable", err)
	}
	m = &scripted{caps: vision, answer: func(n int, _ model.Request) (model.Response, error) {
		if n == 0 {
			return model.Response{Text: "0+1|kept"}, nil
		}
		return model.Response{}, model.StatusError(400, fmt.Errorf("invalid"))
	}}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
	if err != nil || outs[0].Line != "kept" || outs[1].Line != "" {
		t.Fatalf("outs %+v, err %v", outs, err)
	}
}

func TestAGroupAsksEachUndescribedImageOnceForTheLeafThatFirstShowsIt(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: vision, answer: replies("0+1|zero " + refOf(a) + "\n1+1|one " + refOf(a) + "\ndescription of " + refOf(a) + ": a red square")}
	l0, l1 := leafAt(0, "user", "user: "+refOf(a), a), leafAt(1, "user", "user: same "+refOf(a), a)
	l0.Describe, l1.Describe = []string{a.Name}, []string{a.Name}
	outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), memory.Group{Context: view, Nodes: []memory.CompactRequest{l0, l1}})
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Descriptions[a.Name] != "a red square" || outs[0].DescribeAsked != 1 || outs[1].DescribeAsked != 0 || len(outs[1].Descriptions) != 0 {
		t.Fatalf("outs %+v", outs)
	}
	if outs[0].Line != "zero "+refOf(a) || outs[1].Line != "one "+refOf(a) {
		t.Fatalf("lines %q %q", outs[0].Line, outs[1].Line)
	}
	task := m.calls()[0].Messages[0].Parts[1].Text
	if strings.Count(task, "for each of: "+refOf(a)+".") != 1 {
		t.Fatalf("task %q", task)
	}
}

func TestEachProviderWritesAGroupOfLinesInOneCall(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			m, calls := p.open(t, func(int, bool) (string, int) {
				return "7+1|seven\n8+1|eight " + refOf(a) + "\n9+1|nine", 0
			})
			g := memory.Group{Context: bigView(60), Nodes: []memory.CompactRequest{
				leafAt(7, "talk", long(900)), leafAt(8, "echo", "echo: shell: "+refOf(a), a), leafAt(9, "talk", long(700)),
			}}
			outs, err := compactor.New(m, compactor.Options{}).CompactGroup(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			if outs[0].Line != "seven" || outs[1].Line != "eight "+refOf(a) || outs[2].Line != "nine" || outs[1].Attached != 1 {
				t.Fatalf("outs %+v", outs)
			}
			cs := calls()
			if len(cs) != 1 || cs[0].system != compactor.SystemPrompt || cs[0].messages != 1 {
				t.Fatalf("calls %+v", cs)
			}
			first := cs[0].first
			if len(first) != 4 || first[0] != g.Context || !strings.Contains(first[1], "Write 3 lines") || first[2] != refOf(a) || first[3] != "<image>" {
				t.Fatalf("blocks %q", first)
			}
		})
	}
}
