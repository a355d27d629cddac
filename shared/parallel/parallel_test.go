package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachCallsEveryIndexOnceWithinTheLimit(t *testing.T) {
	for _, tt := range []struct{ n, limit, wantMost int }{
		{0, 4, 0},
		{1, 4, 1},
		{10, 1, 1},
		{10, 3, 3},
		{10, 0, 1}, // a limit below 1 runs one at a time
		{5, 8, 5},
	} {
		var running, most atomic.Int64
		var mu sync.Mutex
		seen := make([]int, tt.n)
		Each(tt.n, tt.limit, func(i int) {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			seen[i]++
			mu.Unlock()
			running.Add(-1)
		})
		for i, c := range seen {
			if c != 1 {
				t.Errorf("n %d limit %d: index %d called %d times", tt.n, tt.limit, i, c)
			}
		}
		if got := int(most.Load()); got > tt.wantMost || (tt.n > 0 && got < 1) {
			t.Errorf("n %d limit %d: %d calls at once, want at most %d", tt.n, tt.limit, got, tt.wantMost)
		}
	}
}

func TestEachStartsCallsInOrder(t *testing.T) {
	// With one slot, call i starts after call i-1 returned: what a call
	// leaves is there for the next.
	var order []int
	Each(20, 1, func(i int) { order = append(order, i) })
	for i, got := range order {
		if got != i {
			t.Fatalf("call %d started as %d: %v", i, got, order)
		}
	}
}
