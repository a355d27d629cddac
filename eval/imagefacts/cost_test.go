package imagefacts

import (
	"math"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/model"
)

func TestPricesAreFoundByModelFamilyMostSpecificFirst(t *testing.T) {
	tests := []struct {
		name  string
		input float64
		known bool
	}{
		{"anthropic:claude-sonnet-4-5", 3, true},
		{"bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", 3, true},
		{"anthropic:claude-opus-4-5", 5, true},
		{"anthropic:claude-opus-4-1", 15, true},
		{"anthropic:claude-haiku-4-5", 1, true},
		{"bedrock:anthropic.claude-3-5-haiku-20241022-v1:0", 0.8, true},
		{"openai:gpt-4o", 0, false},
	}
	for _, tt := range tests {
		p, ok := PricesFor(tt.name)
		if ok != tt.known || p.Input != tt.input {
			t.Errorf("PricesFor(%q) = %+v, %v; want input %v, %v", tt.name, p, ok, tt.input, tt.known)
		}
	}
}

func TestCostCountsEveryKindOfToken(t *testing.T) {
	p := Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	got := p.Cost(model.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 400_000})
	if want := 3 + 1.5 + 0.3 + 1.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
}

func TestCostPerImageIsTheDifferenceBetweenArmsPerAttachedImage(t *testing.T) {
	before := Result{Name: "before", Usage: Usage{Calls: 10, Tokens: model.Usage{InputTokens: 10_000, OutputTokens: 1_000}}}
	after := Result{Name: "after", Usage: Usage{Calls: 20, ImageCalls: 10,
		Tokens:      model.Usage{InputTokens: 20_000, OutputTokens: 2_000},
		ImageTokens: model.Usage{InputTokens: 9_000, OutputTokens: 900}}}
	after.Images.Attached = 10
	out := CostTable(before, after, Prices{Input: 1, Output: 1}, true)
	for _, want := range []string{"| after | 20 | 10 | 20000 | 2000 | 0 | 0 | $0.0220 |",
		"averages 900 input and 90 output tokens", "+1000 input and +100 output tokens per image", "$0.0011 per image"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost table lacks %q:\n%s", want, out)
		}
	}
	if out := CostTable(before, after, Prices{}, false); !strings.Contains(out, "unknown (no prices)") {
		t.Errorf("unknown prices shown as a cost:\n%s", out)
	}
}
