package imagefacts

import (
	"fmt"
	"strings"

	"github.com/durachat/durachat/shared/model"
)

// Prices are US dollars per million tokens.
type Prices struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Cost of the tokens of u.
func (p Prices) Cost(u model.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}

// listPrices are Anthropic's published list prices when this was written,
// matched by a part of the model id, most specific first, for its models
// called directly or on Bedrock (whose ids hold the same names). Prices
// change and Bedrock regions differ: check them before quoting a cost, or
// pass them as flags.
var listPrices = []struct {
	match  string
	prices Prices
}{
	{"opus-4-5", anthropicPrices(5, 25)},
	{"opus", anthropicPrices(15, 75)},
	{"sonnet", anthropicPrices(3, 15)},
	{"haiku-4-5", anthropicPrices(1, 5)},
	{"3-5-haiku", anthropicPrices(0.8, 4)},
	{"3-haiku", anthropicPrices(0.25, 1.25)},
}

// anthropicPrices: a cache write costs 1.25 times input, a cache read 0.1.
func anthropicPrices(in, out float64) Prices {
	return Prices{Input: in, Output: out, CacheRead: in / 10, CacheWrite: in * 1.25}
}

// PricesFor looks a model up in the list prices by its name
// ("<provider>:<model id>"); false when it is not listed.
func PricesFor(modelName string) (Prices, bool) {
	name := strings.ToLower(strings.ReplaceAll(modelName, ".", "-"))
	for _, lp := range listPrices {
		if strings.Contains(name, lp.match) {
			return lp.prices, true
		}
	}
	return Prices{}, false
}

// CostTable is the tokens and cost of each arm as a Markdown table, and a
// line on what images add: the difference between the arms divided by
// the images attached, so it counts everything the feature adds (image
// tokens, and the short messages now summarized rather than kept word for
// word). known false prints no costs.
func CostTable(before, after Result, p Prices, known bool) string {
	var b strings.Builder
	b.WriteString("| Arm | Calls | With images | Input tokens | Output tokens | Cache read | Cache write | Cost |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range []Result{before, after} {
		u := r.Usage.Tokens
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", r.Name, r.Usage.Calls, r.Usage.ImageCalls,
			u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, dollars(p.Cost(u), known))
	}
	n := after.Images.Attached
	if n == 0 {
		b.WriteString("\nNo image was attached, so there is no cost per image.\n")
		return b.String()
	}
	added := func(u model.Usage) int { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }
	it := after.Usage.ImageTokens
	fmt.Fprintf(&b, "\nPer image (%d attached): a call carrying one averages %d input and %d output tokens; "+
		"the after arm used %+d input and %+d output tokens per image more than the before arm, %s per image.\n",
		n, added(it)/max(after.Usage.ImageCalls, 1), it.OutputTokens/max(after.Usage.ImageCalls, 1),
		(added(after.Usage.Tokens)-added(before.Usage.Tokens))/int(n),
		(after.Usage.Tokens.OutputTokens-before.Usage.Tokens.OutputTokens)/int(n),
		dollars((p.Cost(after.Usage.Tokens)-p.Cost(before.Usage.Tokens))/float64(n), known))
	return b.String()
}

func dollars(v float64, known bool) string {
	if !known {
		return "unknown (no prices)"
	}
	return fmt.Sprintf("$%.4f", v)
}
