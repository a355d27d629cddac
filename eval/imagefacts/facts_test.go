package imagefacts

import "testing"

func TestFactsAreGradedByNormalisedPresenceOnWordBoundaries(t *testing.T) {
	tests := []struct {
		text, fact string
		want       bool
	}{
		{"[image 0123456789abcdef] shows error code E4471 in payment-service.", "error code E4471 in payment-service", true},
		{"ERROR CODE e4471 IN Payment-Service", "error code E4471 in payment-service", true},
		{"error code\nE4471   in payment-service", "error code E4471 in payment-service", true},
		{"Signups peaked at 3,912 in March", "signups peaked at 3912 in March", true},
		{"receipt: total $1,284.50 at Harbor Office Supply", "total $1284.50 at Harbor Office Supply", true},
		{"max connections changed from 100 to 25", "max_connections changed from 100 to 25", true},
		{"error code E44710 in payment-service", "error code E4471 in payment-service", false},
		{"total $1284.5 at Harbor Office Supply", "total $1284.50 at Harbor Office Supply", false},
		{"max_connections changed from 100 to 250", "max_connections changed from 100 to 25", false},
		{"an error in payment-service", "error code E4471 in payment-service", false},
		{"anything", "", false},
		{"anything", "...", false},
	}
	for _, tt := range tests {
		if got := Contains(tt.text, tt.fact); got != tt.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tt.text, tt.fact, got, tt.want)
		}
	}
}

func TestCatalogHasSixKindsEachWithOneDistinctFact(t *testing.T) {
	facts := Catalog()
	kinds := map[Kind]bool{}
	for i, f := range facts {
		kinds[f.Kind] = true
		if Normalize(f.Fact) == "" {
			t.Errorf("%s: empty fact", f.Kind)
		}
		for j, g := range facts {
			if i != j && Contains(g.Fact, f.Fact) {
				t.Errorf("the fact of %s is inside the fact of %s", f.Kind, g.Kind)
			}
		}
		if Contains(f.Caption, f.Fact) {
			t.Errorf("%s: the caption states the fact", f.Kind)
		}
	}
	if len(facts) != 6 || len(kinds) != 6 {
		t.Errorf("%d facts of %d kinds, want 6 of 6", len(facts), len(kinds))
	}
}
