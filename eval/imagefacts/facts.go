// Package imagefacts measures whether what an image shows reaches the
// memory's summaries: synthetic images that each carry one fact, a set of
// conversations that send them, and a run of the real transcript, memory
// and compactor over them that reports the share of image facts found in
// the image message's leaf, in its parent and in the root of its chat.
//
// The images carry their fact twice: drawn as text, for a real model to
// read, and in a PNG tEXt chunk (keyword "fact"), for a scripted model
// that can only "see" what is attached to its request.
package imagefacts

import (
	"strings"
	"unicode"
)

// TextKeyword is the PNG tEXt keyword that carries an image's fact.
const TextKeyword = "fact"

// Kind is what an image shows.
type Kind string

// The six kinds of image the evaluation sends.
const (
	ErrorScreenshot Kind = "error screenshot"
	Chart           Kind = "chart"
	Diagram         Kind = "diagram"
	Receipt         Kind = "receipt"
	UIBug           Kind = "UI bug"
	ConfigDiff      Kind = "config diff"
)

// Fact is one image and the single fact it carries.
type Fact struct {
	Kind Kind
	// Fact is the string graded for: short, specific, and not guessable
	// from the conversation around the image.
	Fact string
	// Caption is what the user says when sending it; it never states
	// the fact.
	Caption string
	// Detail is the rest of what the image shows, drawn around the fact
	// so a real model has a real picture to describe.
	Detail []string
}

// Catalog is the six facts, one per kind, in a fixed order.
func Catalog() []Fact {
	return []Fact{
		{
			Kind: ErrorScreenshot, Fact: "error code E4471 in payment-service",
			Caption: "here's the screenshot from the checkout page",
			Detail:  []string{"2025-06-02 09:14:07 POST /v1/charge", "retrying in 30s (attempt 3 of 5)", "request id 7f3c-aa19"},
		},
		{
			Kind: Chart, Fact: "signups peaked at 3912 in March",
			Caption: "this is the chart from the growth dashboard",
			Detail:  []string{"monthly signups, Jan to Jun", "Jan Feb Mar Apr May Jun"},
		},
		{
			Kind: Diagram, Fact: "checkout-api writes to ledger-db",
			Caption: "attaching the architecture diagram we drew yesterday",
			Detail:  []string{"web", "checkout-api", "ledger-db", "fraud-check"},
		},
		{
			Kind: Receipt, Fact: "total $1284.50 at Harbor Office Supply",
			Caption: "photo of the receipt for the expense report",
			Detail:  []string{"2x standing desk frame", "1x monitor arm", "tax 8.25%", "paid by card ending 0427"},
		},
		{
			Kind: UIBug, Fact: "Save button hidden behind cookie banner",
			Caption: "look at this, the settings page is broken on mobile",
			Detail:  []string{"Settings", "Display name", "Email notifications", "We use cookies. Accept?"},
		},
		{
			Kind: ConfigDiff, Fact: "max_connections changed from 100 to 25",
			Caption: "the diff from last night's deploy",
			Detail:  []string{"db/pool.yaml", "  host: db-primary.internal", "  timeout_ms: 5000"},
		},
	}
}

// Normalize folds text for grading: lower case, thousands separators
// dropped ("3,912" is "3912"), and every run of characters other than
// letters, digits, '$' and '.' between digits made one space, so wrapping,
// underscores and punctuation around a fact do not hide it.
func Normalize(s string) string {
	rs := []rune(strings.ToLower(s))
	var b strings.Builder
	b.Grow(len(s))
	space := true // no leading space
	for i, r := range rs {
		digitsAround := i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1])
		switch {
		case r == ',' && digitsAround:
			continue
		case r == '.' && digitsAround, r == '$', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
			space = false
		default:
			if !space {
				b.WriteByte(' ')
				space = true
			}
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}

// Contains reports whether text states fact, after Normalize of both, on
// word boundaries (so "E44710" does not count for "E4471").
func Contains(text, fact string) bool {
	t, f := " "+Normalize(text)+" ", " "+Normalize(fact)+" "
	return f != "  " && strings.Contains(t, f)
}
