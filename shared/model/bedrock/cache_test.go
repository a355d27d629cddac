package bedrock

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
)

// view is "<chat>\n", n lines of 100 bytes each, and "</chat>".
func view(n int) string {
	var b strings.Builder
	b.WriteString("<chat>\n")
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("%d+1|", i)
		b.WriteString(line + strings.Repeat("x", 99-len(line)) + "\n")
	}
	b.WriteString("</chat>")
	return b.String()
}

func TestPrefixIsCutIntoFourLineBlocksWithCachePointsWithinBedrocksMinimumAndLimit(t *testing.T) {
	// 199 lines: block 0 is "<chat>" and 3 lines (307 bytes), every later
	// whole block 400 bytes; blocks 0..49 are whole, 50 is "</chat>".
	// The prompt through block b is 3 ("sys") + 307 + 400*b bytes.
	tests := []struct {
		name      string
		model     string
		minTokens int
		lines     int
		used      int // cache points already in the request (system)
		marked    []int
	}{
		{"three marks", "m", 1, 199, 0, []int{9, 29, 49}},
		{"two marks on a shorter view", "m", 1, 99, 0, []int{4, 24}},
		{"no whole block, no mark", "m", 1, 2, 0, nil},
		// 2,048 tokens = 8,192 bytes: block 29 ends at 11,910 bytes, only
		// 8,000 before block 49; block 9 at 3,910.
		{"marks closer than the minimum are left out", "m", 2048, 199, 0, []int{49}},
		// 1,024 tokens = 4,096 bytes: 9 ends at 3,910 bytes, too early.
		{"a mark before the minimum is left out", "m", 1024, 199, 0, []int{29, 49}},
		// Claude Haiku 4.5 needs 4,096 tokens (16,384 bytes).
		{"Haiku 4.5 minimum", "us.anthropic.claude-haiku-4-5-20251001-v1:0", 0, 199, 0, []int{49}},
		{"Haiku 4.5 view under its minimum", "us.anthropic.claude-haiku-4-5-20251001-v1:0", 0, 39, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, bedrocktest.Reply{Text: "x"})
			prefix := view(tt.lines)
			req := model.Request{System: "sys", Messages: []model.Message{{Role: "user", Parts: []model.Part{
				{Text: prefix, Prefix: true}, {Text: "the task"},
			}}}}
			m := New(srv.Client(), tt.model, Options{CachePoint: true, MinCacheTokens: tt.minTokens})
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			content := srv.Requests()[0].Messages[0].Content
			if task := content[len(content)-1]; task.Text == nil || *task.Text != "the task" {
				t.Fatalf("last block %+v, want the task", task)
			}
			var joined strings.Builder
			var marked []int
			block := -1
			for _, b := range content[:len(content)-1] {
				switch {
				case b.CachePoint != nil:
					if b.CachePoint.Type != "default" || block < 0 {
						t.Fatalf("cache point %+v after block %d", b.CachePoint, block)
					}
					marked = append(marked, block)
				case b.Text != nil:
					block++
					joined.WriteString(*b.Text)
					if strings.Count(*b.Text, "\n") > model.CacheBlockLines {
						t.Errorf("block %d has more than %d lines", block, model.CacheBlockLines)
					}
				}
			}
			if joined.String() != prefix {
				t.Fatal("the blocks do not join back to the view")
			}
			if fmt.Sprint(marked) != fmt.Sprint(tt.marked) {
				t.Fatalf("cache points after blocks %v, want %v", marked, tt.marked)
			}
		})
	}
}

func TestAtMostFourCachePointsInOneRequest(t *testing.T) {
	srv := serve(t, bedrocktest.Reply{Text: "x"})
	var parts []model.Part
	for i := 0; i < 3; i++ {
		parts = append(parts, model.Part{Text: view(199) + "\n", Prefix: true})
	}
	req := model.Request{Messages: []model.Message{{Role: "user", Parts: parts}}}
	if _, err := New(srv.Client(), "m", Options{CachePoint: true, MinCacheTokens: 1}).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, b := range srv.Requests()[0].Messages[0].Content {
		if b.CachePoint != nil {
			points++
		}
	}
	if points != maxCachePoint {
		t.Fatalf("%d cache points, want Bedrock's limit of %d", points, maxCachePoint)
	}
}
