package stack

import (
	"fmt"
	"sort"
)

// AccountConcurrency is Lambda's default quota of concurrent executions
// in a Region: what the functions that reserve none share.
const AccountConcurrency = 1000

// minUnreserved is what Lambda keeps unreserved of the account's
// concurrency: a deployment whose reservations leave less fails.
const minUnreserved = 100

// limits is how many invocations each function runs at once, as Lambda
// bounds them: a function with ReservedConcurrentExecutions runs that
// many and no other function takes them; every other function draws from
// the account's unreserved concurrency, which they share (pool, the
// functions named in shared). apiCap, when over 0, bounds each function
// that no event source feeds instead (a test's small stack).
type limits struct {
	own    map[string]int // function -> its own bound
	shared []string       // functions drawing from pool
	pool   int
}

func concurrencyLimits(tpl *Template, account, apiCap int) (limits, error) {
	if account == 0 {
		account = AccountConcurrency
	}
	l := limits{own: map[string]int{}, pool: account}
	fed := map[string]bool{}
	for _, src := range tpl.Sources {
		fed[src.Function] = true
	}
	names := make([]string, 0, len(tpl.Functions))
	for name := range tpl.Functions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := tpl.Functions[name]
		switch {
		case apiCap > 0 && !fed[name]:
			l.own[name] = apiCap
		case def.Reserved > 0:
			l.own[name] = def.Reserved
			l.pool -= def.Reserved
		default:
			l.shared = append(l.shared, name)
		}
	}
	if l.pool < minUnreserved {
		return l, fmt.Errorf("the functions reserve %d of the account's concurrency of %d: Lambda keeps %d unreserved",
			account-l.pool, account, minUnreserved)
	}
	return l, nil
}

// bound is the most invocations of function name at once.
func (l limits) bound(name string) int {
	if n, ok := l.own[name]; ok {
		return n
	}
	return l.pool
}
