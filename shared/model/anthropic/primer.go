package anthropic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// primer lets one call go first for a prefix that is not cached yet.
//
// Parallel builds share one compaction view. If they all start at once on a
// cold cache, each pays to write the same cache entry. So the first call
// for a prefix goes alone, and the others wait until it starts answering
// (the prefix is then cached) or fails, for at most wait.
type primer struct {
	mu      sync.Mutex
	entries map[string]*primeEntry
	max     int
	ttl     time.Duration
	wait    time.Duration
	now     func() time.Time
	waiting int // calls waiting now; read by tests
}

type primeEntry struct {
	ready  chan struct{} // closed when the first call answers or fails
	primed bool
	used   time.Time
}

func newPrimer(max int, ttl, wait time.Duration, now func() time.Time) *primer {
	return &primer{entries: map[string]*primeEntry{}, max: max, ttl: ttl, wait: wait, now: now}
}

// primeKey names a cached prefix: the model, the system prompt and the
// marked text.
func primeKey(modelName, system, cached string) string {
	h := sha256.New()
	for _, s := range []string{modelName, system, cached} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// acquire returns when the call may go. release must be called once the
// call has started answering (true) or failed (false); calling it again
// does nothing. The error is the context's.
func (p *primer) acquire(ctx context.Context, key string) (release func(ok bool), err error) {
	noop := func(bool) {}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		now := p.now()
		e := p.entries[key]
		if e != nil && e.primed && now.Sub(e.used) < p.ttl {
			e.used = now // a cache hit keeps the entry alive
			p.mu.Unlock()
			return noop, nil
		}
		if e == nil || e.primed {
			e = &primeEntry{ready: make(chan struct{}), used: now}
			p.entries[key] = e
			p.evict(key)
			p.mu.Unlock()
			return p.releaser(key, e), nil
		}
		ready := e.ready
		p.waiting++
		p.mu.Unlock()

		if timer == nil {
			timer = time.NewTimer(p.wait)
		}
		var done bool
		select {
		case <-ready:
			// Primed: the next pass goes ahead. Failed: one waiter primes.
		case <-timer.C:
			done = true
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if err != nil {
			return noop, err
		}
		if done {
			// Waited long enough: go ahead uncached rather than stall.
			return noop, nil
		}
	}
}

func (p *primer) releaser(key string, e *primeEntry) func(bool) {
	var once sync.Once
	return func(ok bool) {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if ok {
				e.primed = true
				e.used = p.now()
			} else if p.entries[key] == e {
				delete(p.entries, key)
			}
			close(e.ready)
		})
	}
}

// evict keeps at most max entries, dropping the least recently used
// primed ones; an entry being primed is kept (its waiters need it).
func (p *primer) evict(keep string) {
	for len(p.entries) > p.max {
		var oldest string
		var at time.Time
		for k, e := range p.entries {
			if k == keep || !e.primed {
				continue
			}
			if oldest == "" || e.used.Before(at) {
				oldest, at = k, e.used
			}
		}
		if oldest == "" {
			return
		}
		delete(p.entries, oldest)
	}
}

// waiters reports the number of waiting calls, for tests.
func (p *primer) waiters() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}
