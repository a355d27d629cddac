package offline

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/model"
)

func checkLine(t *testing.T, line string) {
	t.Helper()
	if len(line) > Limit {
		t.Fatalf("line of %d bytes, over %d: %q", len(line), Limit, line)
	}
	if !strings.HasPrefix(line, Marker) {
		t.Fatalf("line does not say it is an extract: %q", line)
	}
	if !utf8.ValidString(line) {
		t.Fatalf("line is not valid UTF-8: %q", line)
	}
	if strings.ContainsAny(line, "\r\n") {
		t.Fatalf("line has a line break: %q", line)
	}
}

func TestEveryExtractFitsTheLimitAndSaysItIsNotASummary(t *testing.T) {
	ref := "[image 0123456789abcdef]"
	tests := []struct {
		name   string
		source string
		keeps  []string
	}{
		{"short", "user: hello", []string{"user: hello"}},
		{"long text", "user: " + strings.Repeat("word ", 400), []string{"user: word"}},
		{"multi-line", "talk: first line\n\nsecond\r\nthird " + strings.Repeat("x", 900), []string{"talk: first line second third"}},
		{"unicode", "user: " + strings.Repeat("日本語のテキスト ", 100), []string{"user: 日本語"}},
		{"one long word", "echo: " + strings.Repeat("a", 2000), []string{"echo: a"}},
		{"image ref past the cut", "user: " + strings.Repeat("look ", 200) + ref, []string{ref}},
		{"merge of extracts", Marker + " user: " + strings.Repeat("alpha ", 100) + "\n" + Marker + " talk: " + strings.Repeat("beta ", 100),
			[]string{"user: alpha", "talk: beta"}},
		{"merge with one short side", Marker + " user: short\n" + Marker + " talk: " + strings.Repeat("gamma ", 200),
			[]string{"user: short", "talk: gamma"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := Extract(tt.source, Limit)
			checkLine(t, line)
			if strings.Count(line, Marker) != 1 {
				t.Fatalf("marker repeated: %q", line)
			}
			for _, k := range tt.keeps {
				if !strings.Contains(line, k) {
					t.Errorf("line %q lost %q", line, k)
				}
			}
			if again := Extract(tt.source, Limit); again != line {
				t.Fatalf("not deterministic: %q then %q", line, again)
			}
		})
	}
}

func TestCompleteExtractsTheInputBlock(t *testing.T) {
	source := "user: " + strings.Repeat("a fact ", 150)
	req := model.Request{Messages: []model.Message{{Role: "user", Parts: []model.Part{
		{Text: "<chat>\n<input>\nnot this\n</input>\n</chat>", Prefix: true},
		{Text: "Compress message 3.\n<input>\n" + source + "\n</input>\nAnswer with the line only."},
	}}}}
	resp, err := New().Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	checkLine(t, resp.Text)
	if !strings.Contains(resp.Text, "user: a fact") {
		t.Fatalf("extract %q is not from the task's input", resp.Text)
	}
	if New().Capabilities().Images {
		t.Fatal("the offline model takes no images")
	}
}

func TestCompleteWithoutInputIsANonRetryableError(t *testing.T) {
	_, err := New().Complete(context.Background(), model.Request{Messages: []model.Message{{Role: "user", Parts: []model.Part{{Text: "hi"}}}}})
	if err == nil || model.IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable error", err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("user: hello [image 0123456789abcdef] " + strings.Repeat("é", 600))
	f.Add(Marker + " a\n" + Marker + " b")
	f.Add(strings.Repeat("[image 0123456789abcdef]", 40))
	f.Fuzz(func(t *testing.T, source string) {
		if !utf8.ValidString(source) {
			return
		}
		checkLine(t, Extract(source, Limit))
	})
}
