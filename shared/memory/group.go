package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
)

// With a GroupCompactor, one build may write the lines of several nodes of
// a chat in one model call: a leaf with the leaves right after it, or a
// merge with the other merges waiting to start and the merges above them
// whose children the same call writes. Each node keeps its own row, line,
// images, labels and rules; only the call is shared. What the call cannot
// write well (a line never accepted, a leaf whose images do not fit beside
// the others', a call the model turns down) is built on its own in the
// same build, by the single-node rules.

// Bounds on one group call: its nodes (the claims a chat may hold), the
// bytes of their sources (a larger leaf is built on its own), and the
// images loaded for it, as for one leaf (a leaf past them is built on its
// own, with its images).
const (
	maxGroup         = MaxInFlight
	groupSourceBytes = 32 << 10
)

// groupWith takes, for the build of n its owner just started, the nodes
// one call may write with it, and returns them with n, children before
// parents. A node that failed before is built on its own (its refusals
// count for it alone), and so is n when it did.
//
//   - A leaf takes the leaves right after it that the scheduler claimed and
//     no build started yet, in order, up to the first that is not.
//   - A merge takes the merges the scheduler claimed and no build started,
//     lowest level first; then, while the chat holds fewer than
//     MaxInFlight claims and every unbuilt leaf is claimed (leaves before
//     merges), each parent whose children are built or in the group.
func (st *chatState) groupWith(n Node, owner string, now time.Time, lease time.Duration) []Node {
	group := []Node{n}
	nowMS, until := now.UnixMilli(), now.Add(lease).UnixMilli()
	in := map[Node]bool{n: true}
	waiting := func(c Node) bool {
		k, ok := st.claimOf(c)
		_, failed := st.retryOf(c)
		return ok && !failed && !in[c] && st.Claims[k].Owner == "" && st.Claims[k].Until > nowMS && !st.built(c)
	}
	take := func(c Node) {
		if k, ok := st.claimOf(c); ok {
			st.Claims[k].Owner, st.Claims[k].Until = owner, until
		} else {
			st.Claims = append(st.Claims, claim{L: c.L, I: c.I, Until: until, Owner: owner})
		}
		group = append(group, c)
		in[c] = true
	}
	if n.L == 0 {
		for s := n.I + 1; len(group) < maxGroup && s < st.T && waiting(Node{L: 0, I: s}); s++ {
			take(Node{L: 0, I: s})
		}
		return group
	}
	var queued []Node
	leafClaims := 0
	for _, c := range st.Claims {
		switch {
		case c.L == 0:
			leafClaims++
		case waiting(c.node()):
			queued = append(queued, c.node())
		}
	}
	sortNodes(queued)
	for _, c := range queued {
		if len(group) >= maxGroup {
			break
		}
		take(c)
	}
	if st.unbuiltLeaves() > int64(leafClaims) {
		sortNodes(group)
		return group
	}
	for k := 0; k < len(group) && len(group) < maxGroup && len(st.Claims) < MaxInFlight; k++ {
		p := group[k].Parent()
		if in[p] || !p.Complete(st.T) || st.built(p) {
			continue
		}
		_, claimed := st.claimOf(p)
		_, failed := st.retryOf(p)
		a, b := p.Children()
		if claimed || failed || !(in[a] || st.built(a)) || !(in[b] || st.built(b)) {
			continue
		}
		take(p)
	}
	sortNodes(group)
	return group
}

// sortNodes orders nodes by level, then index: children before parents.
func sortNodes(nodes []Node) {
	slices.SortFunc(nodes, func(a, b Node) int {
		if a.L != b.L {
			return a.L - b.L
		}
		return int(max(-1, min(1, a.I-b.I)))
	})
}

// member is one node of a group build.
type member struct {
	nb  *nodeBuild
	src loaded
	// loaded: src holds the node's source; chained: a merge over a line
	// the same call writes, whose source is known only after it.
	loaded, chained bool
	alone           bool // built by a call of its own
	released        bool // left unbuilt, its claim given back to the scheduler
	done            bool // row holds its line
	res             produced
	row             nodeRow
	err             error
}

// buildGroup builds the nodes of b.group (b.n among them), which this
// build claimed: each node's source is loaded, the ones kept word for word
// are written at once, the others in one CompactGroup call, and what that
// call leaves is built on its own. Each node is then recorded as a build
// of its own would be (built or failed, with its counts); a merge over a
// line the group did not write is given back to the scheduler. The
// delivered message's node answers for the build; every other node that
// failed is sent again after the retry delay, since its own message may
// be gone.
func (b *nodeBuild) buildGroup(ctx context.Context) error {
	m := b.m
	gc := m.compactor.(GroupCompactor)
	bctx, cancel := context.WithTimeout(ctx, m.lease*9/10)
	defer cancel()

	members := make([]*member, len(b.group))
	byNode := make(map[Node]*member, len(b.group))
	for k, n := range b.group {
		nb := *b
		nb.n = n
		members[k] = &member{nb: &nb}
		byNode[n] = members[k]
	}
	known := map[Node]string{} // lines of the group written so far
	written := func(mb *member) {
		mb.done = true
		known[mb.nb.n] = Line(mb.row.Text)
	}
	sourceBytes, imageBytes, images := 0, 0, 0
	for _, mb := range members {
		n := mb.nb.n
		if row, err := m.readRow(bctx, b.ch, n); err == nil {
			mb.row = row
			written(mb)
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			mb.err = fmt.Errorf("reading node %s: %w", n.Label(), err)
			continue
		}
		if n.L > 0 && pendingChild(n, byNode, known) {
			// Its stored children now; the others once the call wrote them.
			mb.chained = true
			mb.src, mb.err = mb.nb.load(bctx, withPending(n, byNode, known))
			continue
		}
		if !mb.load(bctx, known) {
			continue
		}
		src, c := mb.src, mb.src.c
		if len(c.Images) == 0 && len(c.Source) <= LineBytes {
			mb.res, mb.row, mb.err = mb.nb.store(bctx, src, Compacted{Line: c.Source, Verbatim: true})
			if mb.err == nil {
				written(mb)
			}
			continue
		}
		size := 0
		for _, img := range c.Images {
			size += len(img.Data)
		}
		if sourceBytes+len(c.Source) > groupSourceBytes || imageBytes+size > LeafImageBytes || images+len(c.Images) > MaxLeafImages {
			mb.alone = true
			continue
		}
		sourceBytes, imageBytes, images = sourceBytes+len(c.Source), imageBytes+size, images+len(c.Images)
	}

	call := b.groupCall(bctx, gc, members, byNode, known, written)

	// What the call left is built on its own, at once.
	var wg sync.WaitGroup
	for _, mb := range members {
		if mb.alone && mb.loaded && !mb.done && mb.err == nil {
			wg.Add(1)
			go func(mb *member) {
				defer wg.Done()
				mb.res, mb.row, mb.err = mb.nb.compactAlone(bctx, mb.src)
				mb.done = mb.err == nil
			}(mb)
		}
	}
	wg.Wait()
	if call != nil {
		// An error of the call itself, for the nodes it was to write.
		for _, mb := range members {
			if mb.err == nil && !mb.done && !mb.alone && !mb.released && (mb.loaded || mb.chained) {
				mb.err = call
			}
		}
	}
	return b.recordGroup(ctx, members)
}

// groupCall makes the group's call for the members that need the model,
// stores the lines it wrote, and marks the members it did not write to be
// built alone (or released, for a merge over a line not written). It
// returns the call's error when that fails every node in it (retryable),
// nil otherwise.
func (b *nodeBuild) groupCall(ctx context.Context, gc GroupCompactor, members []*member, byNode map[Node]*member, known map[Node]string, written func(*member)) error {
	var in []*member
	for _, mb := range members {
		if mb.err != nil || mb.done || mb.alone || mb.released {
			continue
		}
		if mb.chained && !childrenIn(mb.nb.n, byNode, known, in) {
			mb.released = true
			continue
		}
		in = append(in, mb)
	}
	switch {
	case len(in) == 0:
		return nil
	case len(in) == 1 && in[0].loaded:
		in[0].alone = true
		return nil
	}
	g := Group{Nodes: make([]Compaction, len(in))}
	end := int64(0)
	for k, mb := range in {
		n := mb.nb.n
		end = max(end, contextEnd(n))
		if mb.loaded {
			g.Nodes[k] = mb.src.c
			g.Nodes[k].Children = mb.src.lines
			continue
		}
		// A chained merge: its children written so far by the group, or
		// stored before it; "" for those the call writes.
		lines := mb.src.lines
		a, c := n.Children()
		for j, child := range []Node{a, c} {
			if l, ok := known[child]; ok {
				lines[j] = l
			}
		}
		g.Nodes[k] = Compaction{Level: n.L, Index: n.I, Label: n.Label(), Images: []model.Image{}, Children: lines}
	}
	ctxBlock, err := b.contextBlock(ctx, end)
	g.Context = ctxBlock
	var outs []Compacted
	if err == nil {
		outs, err = gc.CompactGroup(ctx, g)
	}
	if err == nil && len(outs) != len(in) {
		err = &model.Error{Retryable: true, Err: fmt.Errorf("compactor answered %d lines for a group of %d", len(outs), len(in))}
	}
	if err != nil {
		if !countsAsRefusal(err) {
			// Retried later, as one build's outage would be; a merge over
			// a line of the group goes back to the scheduler.
			for _, mb := range in {
				if mb.chained {
					mb.released = true
				}
			}
			return err
		}
		// The model turned the call down: each node alone, where its own
		// refusals count and its images get the names-only retry.
		for _, mb := range in {
			if mb.chained {
				mb.released = true
			} else {
				mb.alone = true
			}
		}
		return nil
	}
	counted := false
	for k, mb := range in {
		out := outs[k]
		if mb.chained {
			if pendingChild(mb.nb.n, byNode, known) {
				mb.released = true
				continue
			}
			if !mb.load(ctx, known) {
				continue
			}
		}
		if out.Line == "" {
			mb.alone = true
			continue
		}
		src := mb.src
		// The call is counted once, on the first row it wrote.
		src.res.called = !out.Verbatim && !counted
		if out.Verbatim {
			out.Line = src.c.Source
		}
		mb.res, mb.row, mb.err = mb.nb.store(ctx, src, out)
		if mb.err == nil {
			counted = counted || src.res.called
			written(mb)
		}
	}
	return nil
}

// load loads the member's source, its children's lines from known where
// it has them, and reports whether it did.
func (mb *member) load(ctx context.Context, known map[Node]string) bool {
	mb.src, mb.err = mb.nb.load(ctx, known)
	mb.res, mb.loaded = mb.src.res, mb.err == nil
	return mb.loaded
}

// withPending is known with "" for each child of merge n that is a node
// of the group not written yet: loading n then reads only the children
// stored before the group.
func withPending(n Node, byNode map[Node]*member, known map[Node]string) map[Node]string {
	out := maps.Clone(known)
	a, c := n.Children()
	for _, child := range []Node{a, c} {
		if _, w := known[child]; !w && byNode[child] != nil {
			out[child] = ""
		}
	}
	return out
}

// pendingChild reports whether a child of merge n is a node of the group
// whose line is not written yet.
func pendingChild(n Node, byNode map[Node]*member, known map[Node]string) bool {
	a, c := n.Children()
	for _, child := range []Node{a, c} {
		if _, w := known[child]; !w && byNode[child] != nil {
			return true
		}
	}
	return false
}

// childrenIn reports whether every child of merge n that the group has not
// written yet is a node of the call so far.
func childrenIn(n Node, byNode map[Node]*member, known map[Node]string, call []*member) bool {
	a, c := n.Children()
	for _, child := range []Node{a, c} {
		if _, w := known[child]; w {
			continue
		}
		if mb := byNode[child]; mb != nil && !slices.Contains(call, mb) {
			return false
		}
	}
	return true
}

// recordGroup records each member as its own build would: built, failed
// (retried after the delay) or released. The delivered node's outcome is
// the answer; the other failed nodes are sent again after the delay.
func (b *nodeBuild) recordGroup(ctx context.Context, members []*member) error {
	m := b.m
	var answer error
	var again, released []Node
	for _, mb := range members {
		n := mb.nb.n
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		var err error
		switch {
		case errors.Is(mb.err, errRetired):
			cancel()
			return nil // deleted under the build: nothing to record
		case mb.done:
			err = mb.nb.finish(rctx, mb.res, mb.row)
		case mb.err != nil:
			err = mb.nb.fail(rctx, mb.res, mb.err)
			if n != b.n {
				again = append(again, n)
			}
		default:
			released = append(released, n)
		}
		cancel()
		if n == b.n {
			answer = err
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if len(released) > 0 {
		b.release(rctx, released)
	}
	if len(again) > 0 {
		if err := m.sendLater(rctx, b.ch, again, m.retry); err != nil {
			m.logger.WarnContext(ctx, "memory: queueing retries", "chat", b.ch.ID, "err", err)
		}
	}
	return answer
}

// release gives the claims this build holds on nodes back to the
// scheduler, which sends what may start now.
func (b *nodeBuild) release(ctx context.Context, nodes []Node) {
	m := b.m
	var sends []Node
	_, err := m.states.update(ctx, b.ch, func(st *chatState) error {
		sends = nil
		for _, n := range nodes {
			if k, ok := st.claimOf(n); ok && st.Claims[k].Owner == b.owner {
				st.Claims = append(st.Claims[:k], st.Claims[k+1:]...)
			}
		}
		sends, _ = st.schedule(m.now(), m.lease)
		return nil
	})
	if errors.Is(err, errRetired) {
		return
	}
	if err != nil {
		m.logger.WarnContext(ctx, "memory: releasing claims", "chat", b.ch.ID, "err", err)
		return
	}
	if err := m.send(ctx, b.ch, sends); err != nil {
		m.logger.WarnContext(ctx, "memory: queueing builds", "chat", b.ch.ID, "err", err)
	}
}

// sendLater queues one build message per node, after delay. The nodes
// keep their retry entries, so an early or duplicate message builds
// nothing twice.
func (m *Memory) sendLater(ctx context.Context, c chatid.Chat, nodes []Node, delay time.Duration) error {
	for chunk := range slices.Chunk(nodes, store.MaxSendBatch) {
		bodies := make([]string, len(chunk))
		for i, n := range chunk {
			bodies[i] = messageBody(c, n)
		}
		if err := m.queue.SendBatch(ctx, bodies, delay); err != nil {
			return err
		}
	}
	return nil
}
