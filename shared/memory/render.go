package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
)

// ReadView returns a chat's view after running its scheduler. With wait it
// first waits, at most the configured bound, until every view line is
// built or the memory is stalled.
func (m *Memory) ReadView(ctx context.Context, tenant, chat string, wait bool) (wire.View, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.View{}, err
	}
	return m.readView(ctx, c, wait)
}

// readView is ReadView of the incarnation c.
func (m *Memory) readView(ctx context.Context, c chatid.Chat, wait bool) (wire.View, error) {
	st, err := m.pump(ctx, c, -1)
	if err != nil {
		return wire.View{}, err
	}
	if wait {
		st, err = m.waitBuilt(ctx, c, st)
		if err != nil {
			return wire.View{}, err
		}
	}
	return m.render(ctx, c, st)
}

// How a waiting view reads the state item, which builds in another process
// (the compact function) change: every waitFirstPoll for the first
// waitFirstFor of the wait, when a turn's quick builds (a line kept word
// for word, a short leaf) land; every waitFastPoll until waitFastFor, when
// the rest of a turn's builds land, so that it answers within about that
// long of the last awaited line landing; then at a delay growing by an
// eighth of the time waited, up to waitSlowPoll, so that a long wait
// costs few reads. docs/memory.md counts the reads.
const (
	waitFirstPoll = 5 * time.Millisecond
	waitFirstFor  = 250 * time.Millisecond
	waitFastPoll  = 20 * time.Millisecond
	waitFastFor   = 3 * time.Second
	waitSlowPoll  = time.Second
)

// waitPoll is the delay before the next read of the state, elapsed into
// a wait.
func waitPoll(elapsed time.Duration) time.Duration {
	switch {
	case elapsed < waitFirstFor:
		return waitFirstPoll
	case elapsed < waitFastFor:
		return waitFastPoll
	}
	return min(waitFastPoll+(elapsed-waitFastFor)/8, waitSlowPoll)
}

// renderReserve is the part of a request's own deadline (a Lambda
// invocation's, the gateway's) that a wait leaves to read and render the
// view: a wait that ran into the deadline would answer with an error, not
// with what is built.
const renderReserve = 3 * time.Second

// waitFor is how long a view may wait: the configured bound, cut short so
// that renderReserve is left before ctx's deadline (never below zero).
func waitFor(ctx context.Context, bound time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(d)-renderReserve)
	}
	return max(bound, 0)
}

// waitBuilt waits until the view has no placeholder or the memory stalls.
// This process's own changes wake it at once; builds in another process
// are seen by reading the state item on the waitPoll schedule.
func (m *Memory) waitBuilt(ctx context.Context, c chatid.Chat, st *chatState) (*chatState, error) {
	deadline := time.NewTimer(waitFor(ctx, m.wait))
	defer deadline.Stop()
	start := time.Now()
	lastPump := start
	for st.unbuiltLeaves() > 0 && !st.stalled() {
		changed, release := m.changes.watch(c)
		// A wait for builds that have run long already (a model call that
		// hangs, a view asked again) polls as a long wait does.
		tick := time.NewTimer(waitPoll(max(time.Since(start), st.awaitedBuildAge(m.now(), m.claimLease))))
		select {
		case <-ctx.Done():
			tick.Stop()
			release()
			return st, nil // answer with what is built
		case <-deadline.C:
			tick.Stop()
			release()
			return st, nil
		case <-changed:
		case <-tick.C:
		}
		tick.Stop()
		release()
		var err error
		if time.Since(lastPump) > 5*time.Second {
			// A long wait also re-runs the scheduler, so a claim that
			// lapsed meanwhile is taken back.
			st, err = m.pump(ctx, c, -1)
			lastPump = time.Now()
		} else {
			st, _, err = m.states.get(ctx, c)
		}
		if err != nil {
			return nil, err
		}
	}
	return st, nil
}

// render reads the view's built lines (from the cache, the view snapshot
// and the rows of the lines it lacks) and renders it.
func (m *Memory) render(ctx context.Context, c chatid.Chat, st *chatState) (wire.View, error) {
	nodes := st.View.nodes()
	var want []Node
	for _, n := range nodes {
		if st.built(n) {
			want = append(want, n)
		}
	}
	rows, err := m.viewRows(ctx, c, st.Gen, want)
	if err != nil {
		return wire.View{}, err
	}
	var unbuilt int64
	text := renderLines(nodes, func(n Node) (string, bool) {
		r, ok := rows[n]
		if !ok {
			unbuilt++
		}
		return r.line, ok
	})
	return wire.View{
		View:      text,
		Lines:     int64(len(nodes)),
		Bytes:     int64(len(text) - len("<chat>\n") - len("</chat>")),
		Unbuilt:   unbuilt,
		Retrying:  st.waiting(),
		Stalled:   st.stalled(),
		LastError: st.LastError,
	}, nil
}

// NodeLine returns the line of node (l, i) of a chat as the view would
// show it, and whether the node is built; an unbuilt node gives "" and
// false. It reads the one row (or the cache) and runs no scheduler: it is
// for tools and evaluations that inspect the tree.
func (m *Memory) NodeLine(ctx context.Context, tenant, chat string, l int, i int64) (line string, built bool, err error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return "", false, err
	}
	return m.nodeLine(ctx, c, l, i)
}

// nodeLine is NodeLine of the incarnation c.
func (m *Memory) nodeLine(ctx context.Context, c chatid.Chat, l int, i int64) (line string, built bool, err error) {
	if l < 0 || l > 62 || i < 0 {
		return "", false, fmt.Errorf("memory: node (%d, %d) does not exist: level 0 to 62, index at least 0", l, i)
	}
	n := Node{L: l, I: i}
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return "", false, err
	}
	if len(st.Stale) > 0 && !st.built(n) {
		return "", false, nil // a line an erasure took back
	}
	rows, err := m.rows(ctx, c, st.Gen, []Node{n})
	if err != nil {
		return "", false, err
	}
	r, ok := rows[n]
	return r.line, ok, nil
}
