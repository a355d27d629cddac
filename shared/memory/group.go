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
	g := &groupTaking{
		st: st, owner: owner,
		nowMS: now.UnixMilli(), until: now.Add(lease).UnixMilli(),
		nodes: []Node{n}, in: map[Node]bool{n: true},
	}
	if n.L == 0 {
		g.takeNextLeaves(n)
		return g.nodes
	}
	leafClaims := g.takeQueuedMerges()
	if st.unbuiltLeaves() <= int64(leafClaims) {
		// Every unbuilt leaf is claimed: merges may go ahead of them.
		g.takeReadyParents()
	}
	sortNodes(g.nodes)
	return g.nodes
}

// groupTaking is a group being taken by groupWith: the nodes taken so far,
// in the order taken, for owner, whose claims then hold until until.
type groupTaking struct {
	st           *chatState
	owner        string
	nowMS, until int64
	nodes        []Node
	in           map[Node]bool
}

// waiting reports whether c is claimed by the scheduler, unstarted, never
// failed, unbuilt and not taken yet.
func (g *groupTaking) waiting(c Node) bool {
	st := g.st
	k, ok := st.claimOf(c)
	_, failed := st.retryOf(c)
	return ok && !failed && !g.in[c] && st.Claims[k].Owner == "" && st.Claims[k].Until > g.nowMS && !st.built(c)
}

// take claims c for the owner (its scheduler claim, or a new one) and adds
// it to the group.
func (g *groupTaking) take(c Node) {
	st := g.st
	if k, ok := st.claimOf(c); ok {
		st.Claims[k].Owner, st.Claims[k].Until = g.owner, g.until
	} else {
		st.Claims = append(st.Claims, claim{L: c.L, I: c.I, Until: g.until, Owner: g.owner})
	}
	g.nodes = append(g.nodes, c)
	g.in[c] = true
}

// takeNextLeaves takes the waiting leaves right after leaf n, up to the
// first that is not waiting.
func (g *groupTaking) takeNextLeaves(n Node) {
	for s := n.I + 1; len(g.nodes) < maxGroup && s < g.st.T && g.waiting(Node{L: 0, I: s}); s++ {
		g.take(Node{L: 0, I: s})
	}
}

// takeQueuedMerges takes the waiting merges, lowest level first, and
// returns how many leaves the chat holds claims on.
func (g *groupTaking) takeQueuedMerges() (leafClaims int) {
	var queued []Node
	for _, c := range g.st.Claims {
		switch {
		case c.L == 0:
			leafClaims++
		case g.waiting(c.node()):
			queued = append(queued, c.node())
		}
	}
	sortNodes(queued)
	for _, c := range queued {
		if len(g.nodes) >= maxGroup {
			break
		}
		g.take(c)
	}
	return leafClaims
}

// takeReadyParents takes, while the group and the chat's claims have room,
// each parent of a node of the group (those it takes included) that may
// start once the group is written.
func (g *groupTaking) takeReadyParents() {
	for k := 0; k < len(g.nodes) && len(g.nodes) < maxGroup && len(g.st.Claims) < MaxInFlight; k++ {
		if p := g.nodes[k].Parent(); g.parentReady(p) {
			g.take(p)
		}
	}
}

// parentReady reports whether merge p is complete, untaken, unbuilt,
// unclaimed and never failed, with each child built or in the group.
func (g *groupTaking) parentReady(p Node) bool {
	st := g.st
	if g.in[p] || !p.Complete(st.T) || st.built(p) {
		return false
	}
	if _, claimed := st.claimOf(p); claimed {
		return false
	}
	if _, failed := st.retryOf(p); failed {
		return false
	}
	a, b := p.Children()
	return (g.in[a] || st.built(a)) && (g.in[b] || st.built(b))
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
	bctx, cancel := context.WithTimeout(ctx, b.m.claimLease*9/10)
	defer cancel()

	g := b.newGroupRun()
	g.prepare(bctx)
	call := g.call(bctx)
	g.buildAlone(bctx)
	if call != nil {
		g.failCalled(call)
	}
	return b.recordGroup(ctx, g.members)
}

// groupRun is one group build under way: its members, in the group's
// order and by node, and the lines of the group written so far.
type groupRun struct {
	b       *nodeBuild
	members []*member
	byNode  map[Node]*member
	known   map[Node]string
}

// newGroupRun makes a member of each node of b.group, each with a build
// of its own.
func (b *nodeBuild) newGroupRun() *groupRun {
	g := &groupRun{
		b:       b,
		members: make([]*member, len(b.group)),
		byNode:  make(map[Node]*member, len(b.group)),
		known:   map[Node]string{},
	}
	for k, n := range b.group {
		nb := *b
		nb.n = n
		g.members[k] = &member{nb: &nb}
		g.byNode[n] = g.members[k]
	}
	return g
}

// written marks mb's row as holding its line, which merges over it may
// now read.
func (g *groupRun) written(mb *member) {
	mb.done = true
	g.known[mb.nb.n] = Line(mb.row.Text)
}

// prepare readies each member for the call: a node already built is
// written, a merge over a line of the group is chained, a source kept word
// for word is stored at once, and one past the call's bounds (beside the
// members before it) is built alone.
func (g *groupRun) prepare(ctx context.Context) {
	var budget groupBudget
	for _, mb := range g.members {
		if g.prepareMember(ctx, mb) && !budget.add(mb.src.c) {
			mb.alone = true
		}
	}
}

// prepareMember reads or loads mb's node and reports whether it is left
// for the model: a source loaded and not kept word for word.
func (g *groupRun) prepareMember(ctx context.Context, mb *member) bool {
	n := mb.nb.n
	if row, err := g.b.existingRow(ctx, n); err == nil {
		mb.row = row
		g.written(mb)
		return false
	} else if !errors.Is(err, store.ErrNotFound) {
		mb.err = fmt.Errorf("reading node %s: %w", n.Label(), err)
		return false
	}
	if n.L > 0 && pendingChild(n, g.byNode, g.known) {
		// Its stored children now; the others once the call wrote them.
		mb.chained = true
		mb.src, mb.err = mb.nb.load(ctx, withPending(n, g.byNode, g.known))
		return false
	}
	if !mb.load(ctx, g.known) {
		return false
	}
	if c := mb.src.c; len(c.Images) == 0 && len(c.Source) <= LineBytes {
		mb.res, mb.row, mb.err = mb.nb.store(ctx, mb.src, Compacted{Line: c.Source, Verbatim: true})
		if mb.err == nil {
			g.written(mb)
		}
		return false
	}
	return true
}

// groupBudget is what one group call's sources use of its bounds.
type groupBudget struct {
	sourceBytes, imageBytes, images int
}

// add counts c against the bounds and reports whether it fits; one that
// does not is not counted.
func (bu *groupBudget) add(c CompactRequest) bool {
	size := 0
	for _, img := range c.Images {
		size += len(img.Data)
	}
	if bu.sourceBytes+len(c.Source) > groupSourceBytes || bu.imageBytes+size > LeafImageBytes || bu.images+len(c.Images) > MaxLeafImages {
		return false
	}
	bu.sourceBytes, bu.imageBytes, bu.images = bu.sourceBytes+len(c.Source), bu.imageBytes+size, bu.images+len(c.Images)
	return true
}

// buildAlone builds what the call left on its own, at once, each member
// in parallel.
func (g *groupRun) buildAlone(ctx context.Context) {
	var wg sync.WaitGroup
	for _, mb := range g.members {
		if mb.alone && mb.loaded && !mb.done && mb.err == nil {
			wg.Add(1)
			go func(mb *member) {
				defer wg.Done()
				mb.res, mb.row, mb.err = mb.nb.compactAlone(ctx, mb.src)
				mb.done = mb.err == nil
			}(mb)
		}
	}
	wg.Wait()
}

// failCalled gives the error of the call itself to the nodes it was to
// write and nothing else did.
func (g *groupRun) failCalled(call error) {
	for _, mb := range g.members {
		if mb.err == nil && !mb.done && !mb.alone && !mb.released && (mb.loaded || mb.chained) {
			mb.err = call
		}
	}
}

// call makes the group's call for the members that need the model,
// stores the lines it wrote, and marks the members it did not write to be
// built alone (or released, for a merge over a line not written). It
// returns the call's error when that fails every node in it (retryable),
// nil otherwise.
func (g *groupRun) call(ctx context.Context) error {
	in := g.callMembers()
	switch {
	case len(in) == 0:
		return nil
	case len(in) == 1 && in[0].loaded:
		in[0].alone = true
		return nil
	}
	outs, err := g.compact(ctx, in)
	if err != nil {
		return callFailed(in, err)
	}
	g.storeLines(ctx, in, outs)
	return nil
}

// callMembers are the members left for the call: not written, failed,
// alone or released, and for a chained merge, each child the group has
// not written in the call before it (else it is released).
func (g *groupRun) callMembers() []*member {
	var in []*member
	for _, mb := range g.members {
		if mb.err != nil || mb.done || mb.alone || mb.released {
			continue
		}
		if mb.chained && !childrenIn(mb.nb.n, g.byNode, g.known, in) {
			mb.released = true
			continue
		}
		in = append(in, mb)
	}
	return in
}

// compact asks the model for the lines of in, with the context up to the
// last of them, and checks it answered one line per node.
func (g *groupRun) compact(ctx context.Context, in []*member) ([]Compacted, error) {
	req := Group{Nodes: make([]CompactRequest, len(in))}
	end := int64(0)
	for k, mb := range in {
		end = max(end, contextEnd(mb.nb.n))
		if mb.loaded {
			req.Nodes[k] = mb.src.c
			req.Nodes[k].Children = mb.src.lines
		} else {
			req.Nodes[k] = chainedRequest(mb, g.known)
		}
	}
	ctxBlock, err := g.b.contextBlock(ctx, end)
	if err != nil {
		return nil, err
	}
	req.Context = ctxBlock
	outs, err := g.b.m.compactor.(GroupCompactor).CompactGroup(ctx, req)
	if err == nil && len(outs) != len(in) {
		err = &model.Error{Retryable: true, Err: fmt.Errorf("compactor answered %d lines for a group of %d", len(outs), len(in))}
	}
	return outs, err
}

// chainedRequest is a chained merge as the call sees it: its children
// written so far by the group, or stored before it; "" for those the call
// writes.
func chainedRequest(mb *member, known map[Node]string) CompactRequest {
	n := mb.nb.n
	lines := mb.src.lines
	a, c := n.Children()
	for j, child := range []Node{a, c} {
		if l, ok := known[child]; ok {
			lines[j] = l
		}
	}
	return CompactRequest{Level: n.L, Index: n.I, Label: n.Label(), Images: []model.Image{}, Children: lines}
}

// callFailed marks the members of a failed call and returns the error
// that fails them, nil when each is to be built alone.
func callFailed(in []*member, err error) error {
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

// storeLines stores the line the call wrote for each member of in (a
// chained merge loaded first, now that its children are written); a
// member the call wrote no line for is built alone.
func (g *groupRun) storeLines(ctx context.Context, in []*member, outs []Compacted) {
	counted := false
	for k, mb := range in {
		out := outs[k]
		if mb.chained {
			if pendingChild(mb.nb.n, g.byNode, g.known) {
				mb.released = true
				continue
			}
			if !mb.load(ctx, g.known) {
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
			g.written(mb)
		}
	}
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
		sends, _ = st.schedule(m.now(), m.claimLease)
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
