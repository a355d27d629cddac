package stack

import (
	"slices"
	"strings"
	"testing"
)

func TestEachFunctionRunsAsManyInvocationsAsTheTemplateLetsIt(t *testing.T) {
	phys := Physical{Refs: map[string]string{"Bucket": "b", "Table": "t", "BuildQueue": "http://q/BuildQueue"}}
	for _, c := range []struct {
		name    string
		params  map[string]string
		account int
		apiCap  int
		own     map[string]int
		pool    int
		err     string
	}{
		{name: "WithNoReservationEveryFunctionSharesTheAccountsConcurrency",
			own: map[string]int{}, pool: AccountConcurrency},
		{name: "AReservationIsTheFunctionsOwnAndLeavesTheRestToTheOthers",
			params: map[string]string{"MemoryConcurrency": "40", "CompactConcurrency": "100"},
			own:    map[string]int{"MemoryFunction": 40, "CompactFunction": 100}, pool: AccountConcurrency - 140},
		{name: "TheAccountsQuotaIsAParameterOfTheStack",
			account: 300, params: map[string]string{"RestoreConcurrency": "50"},
			own: map[string]int{"RestoreFunction": 50}, pool: 250},
		{name: "ReservationsThatLeaveLessThan100UnreservedFailAsTheDeploymentWould",
			account: 300, params: map[string]string{"MemoryConcurrency": "150", "OffloadConcurrency": "60"},
			err: "Lambda keeps 100 unreserved"},
		{name: "ATestsCapBoundsTheHTTPFunctionsButNotTheEventSources",
			apiCap: 3, own: map[string]int{"RestoreFunction": 3, "OffloadFunction": 3, "MemoryFunction": 3}, pool: AccountConcurrency},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := ReadTemplate("../../template.yaml", c.params, phys)
			if err != nil {
				t.Fatal(err)
			}
			l, err := concurrencyLimits(tpl, c.account, c.apiCap)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.pool != c.pool {
				t.Errorf("unreserved %d, want %d", l.pool, c.pool)
			}
			for name := range tpl.Functions {
				want, own := c.own[name]
				if !own {
					want = c.pool
				}
				if got := l.bound(name); got != want {
					t.Errorf("%s runs %d at once, want %d", name, got, want)
				}
				if shared := slices.Contains(l.shared, name); shared == own {
					t.Errorf("%s shares the unreserved concurrency: %v, want %v", name, shared, !own)
				}
			}
		})
	}
}
