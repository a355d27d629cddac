// Package parallel runs the independent calls of one request (image
// reads, decodes and writes) a bounded number at a time, so a request
// overlaps its store round trips without taking more than its share.
package parallel

import "sync"

// Each calls fn(i) for every i from 0 to n-1, at most limit at once (1
// when limit is below it), and returns once every call has returned.
// The calls start in order of i, each once a slot is free, so a call may
// look at what the calls before it left (under the caller's own lock).
func Each(n, limit int, fn func(i int)) {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
