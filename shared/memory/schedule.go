package memory

import "time"

// schedule claims the nodes that may start now and returns them; the caller
// sends one build message for each once the state is written. It drops
// claims whose lease ran out first, so their nodes are found again.
//
// Rules: at most MaxInFlight claims; a claim not started a third of a
// lease after it was sent is sent again; leaves before merges; a leaf starts
// once fewer than Lead lines before it are unbuilt (the unbuilt lines of a
// view are exactly its unbuilt leaves, since a merge enters a view only when
// built); a merge is ready once both children are built, lower levels
// first; a node waiting out a retry delay is skipped until it is due.
//
// It visits only the frontier: the unbuilt leaves near the first one, the
// merges just above each level's built prefix, the claims and the retries.
func (st *chatState) schedule(now time.Time, lease time.Duration) (claimed []Node, dropped int) {
	dropped = st.dropLapsedClaims(now.UnixMilli())
	sc := &scheduling{st: st, nowMS: now.UnixMilli(), until: now.Add(lease).UnixMilli(), free: MaxInFlight - len(st.Claims)}
	sc.resend(lease)
	if sc.free <= 0 {
		return nil, dropped
	}
	sc.leaves()
	sc.stale()
	for l := 1; sc.free > 0 && l-1 < len(st.Levels) && int64(1)<<l <= st.T; l++ {
		sc.merges(l)
	}
	return sc.out, dropped
}

// resend sends again the claims no builder has started a third of a
// lease after they were made (or last sent), stamping them as made now.
// Their message may never have gone: a state write can commit though its
// caller saw it fail (a timeout, a dropped connection) and sent nothing,
// and a function can stop between its write and its send. A message that
// was only slow arrives twice; its second delivery finds the node taken or
// built and does nothing.
func (sc *scheduling) resend(lease time.Duration) {
	after := (lease / 3).Milliseconds()
	for k := range sc.st.Claims {
		c := &sc.st.Claims[k]
		if c.Owner == "" && sc.nowMS >= c.Until-lease.Milliseconds()+after {
			c.Until = sc.until
			sc.out = append(sc.out, c.node())
		}
	}
}

// dropLapsedClaims drops the claims whose lease ran out by nowMS, or whose
// node is built, and returns how many it dropped.
func (st *chatState) dropLapsedClaims(nowMS int64) (dropped int) {
	kept := st.Claims[:0]
	for _, c := range st.Claims {
		if c.Until > nowMS && !st.built(c.node()) {
			kept = append(kept, c)
		}
	}
	dropped = len(st.Claims) - len(kept)
	st.Claims = kept
	if len(st.Claims) == 0 {
		st.Claims = nil
	}
	return dropped
}

// scheduling is one pass of schedule: the claims it may still make and
// the nodes it claimed.
type scheduling struct {
	st    *chatState
	nowMS int64
	until int64 // the lease of a claim made now
	free  int
	out   []Node
}

func (sc *scheduling) take(n Node) {
	sc.st.Claims = append(sc.st.Claims, claim{L: n.L, I: n.I, Until: sc.until})
	sc.out = append(sc.out, n)
	sc.free--
}

// startable reports whether n is neither claimed nor waiting out a retry
// delay.
func (sc *scheduling) startable(n Node) bool {
	st := sc.st
	if _, ok := st.claimOf(n); ok {
		return false
	}
	if k, ok := st.retryOf(n); ok && st.Retries[k].At > sc.nowMS {
		return false
	}
	return true
}

// leaves claims the unbuilt leaves, in order, while fewer than Lead of
// them come before.
func (sc *scheduling) leaves() {
	st := sc.st
	unbuiltBefore := 0
	start := int64(0)
	if len(st.Levels) > 0 {
		start = st.Levels[0].Done
	}
	for s := start; s < st.T && sc.free > 0 && unbuiltBefore < Lead; s++ {
		n := Node{L: 0, I: s}
		if st.built(n) {
			continue
		}
		if sc.startable(n) {
			sc.take(n)
		}
		unbuiltBefore++
	}
}

// merges claims the merges of level l whose children are both built,
// oldest first: the parents just above the level below's built prefix,
// then those whose children finished out of order.
func (sc *scheduling) merges(l int) {
	st := sc.st
	below := st.Levels[l-1]
	done := int64(0)
	if l < len(st.Levels) {
		done = st.Levels[l].Done
	}
	for j := done; sc.free > 0 && 2*j+1 < below.Done; j++ {
		n := Node{L: l, I: j}
		if !st.built(n) && sc.startable(n) && sc.staleChildrenBuilt(n) {
			sc.take(n)
		}
	}
	for _, c := range below.More {
		if sc.free <= 0 {
			break
		}
		if c%2 != 0 || c/2 < done {
			continue
		}
		n := Node{L: l, I: c / 2}
		a, b := n.Children()
		if st.built(a) && st.built(b) && !st.built(n) && sc.startable(n) {
			sc.take(n)
		}
	}
}

// stale claims the nodes an erasure took back, lowest level first: a
// leaf at once, a merge once both its children are built again.
func (sc *scheduling) stale() {
	st := sc.st
	if len(st.Stale) == 0 {
		return
	}
	nodes := make([]Node, 0, len(st.Stale))
	for _, s := range st.Stale {
		nodes = append(nodes, s.node())
	}
	sortNodes(nodes)
	for _, n := range nodes {
		if sc.free <= 0 {
			return
		}
		if !sc.startable(n) {
			continue
		}
		if n.L > 0 && !childrenBuilt(st, n) {
			continue
		}
		sc.take(n)
	}
}

// staleChildrenBuilt reports whether the children of a merge over a
// level's built prefix are built: always, unless an erasure took some
// back.
func (sc *scheduling) staleChildrenBuilt(n Node) bool {
	return len(sc.st.Stale) == 0 || childrenBuilt(sc.st, n)
}

// childrenBuilt reports whether both children of the merge n are built.
func childrenBuilt(st *chatState, n Node) bool {
	a, b := n.Children()
	return st.built(a) && st.built(b)
}
