package imagefacts

import (
	"fmt"
	"strings"
)

// Table is the measurement as a Markdown table, one row per arm: the share
// of image facts stated in the leaf of the image's message, in its parent
// and in its chat's root, and how many node lines state a fact of an image
// their chat never sent. It holds no timings, so the same run gives the
// same table.
func Table(results ...Result) string {
	var b strings.Builder
	b.WriteString("| Arm | Image facts in leaf | in parent | in root | Other images' facts |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d |\n", r.Name,
			share(r, AtLeaf), share(r, AtParent), share(r, AtRoot), r.Invented)
	}
	return b.String()
}

func share(r Result, level int) string {
	return fmt.Sprintf("%.0f%% (%d/%d)", 100*r.Share(level), r.Found[level], r.Conversations)
}

// MissReport lists the graded lines that miss their fact or state another
// image's, for reading why a share is below 100%.
func MissReport(r Result) string {
	var b strings.Builder
	for _, m := range r.Misses {
		what := "misses"
		if m.Other {
			what = "states another image's fact"
		}
		fmt.Fprintf(&b, "%s %s %s %q: %s\n", r.Name, m.Chat, m.Node+" "+what, m.Fact, m.Line)
	}
	return b.String()
}
