package memory

import "time"

// schedule claims the nodes that may start now and returns them; the caller
// sends one build message for each once the state is written. It drops
// claims whose lease ran out first, so their nodes are found again.
//
// Rules: at most MaxInFlight claims; leaves before merges; a leaf starts
// once fewer than Lead lines before it are unbuilt (the unbuilt lines of a
// view are exactly its unbuilt leaves, since a merge enters a view only when
// built); a merge is ready once both children are built, lower levels
// first; a node waiting out a retry delay is skipped until it is due.
//
// It visits only the frontier: the unbuilt leaves near the first one, the
// merges just above each level's built prefix, the claims and the retries.
func (st *chatState) schedule(now time.Time, lease time.Duration) (claimed []Node, dropped int) {
	nowMS := now.UnixMilli()
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
	free := MaxInFlight - len(st.Claims)
	var out []Node
	take := func(n Node) {
		st.Claims = append(st.Claims, claim{L: n.L, I: n.I, Until: now.Add(lease).UnixMilli()})
		out = append(out, n)
		free--
	}
	startable := func(n Node) bool {
		if _, ok := st.claimOf(n); ok {
			return false
		}
		if k, ok := st.retryOf(n); ok && st.Retries[k].At > nowMS {
			return false
		}
		return true
	}
	if free <= 0 {
		return nil, dropped
	}
	// Leaves, in order.
	unbuiltBefore := 0
	start := int64(0)
	if len(st.Levels) > 0 {
		start = st.Levels[0].Done
	}
	for s := start; s < st.T && free > 0 && unbuiltBefore < Lead; s++ {
		n := Node{L: 0, I: s}
		if st.built(n) {
			continue
		}
		if startable(n) {
			take(n)
		}
		unbuiltBefore++
	}
	// Merges, lowest level first, oldest first.
	for l := 1; free > 0 && l-1 < len(st.Levels) && int64(1)<<l <= st.T; l++ {
		below := st.Levels[l-1]
		done := int64(0)
		if l < len(st.Levels) {
			done = st.Levels[l].Done
		}
		// Parents whose children are both below the built prefix.
		for j := done; free > 0 && 2*j+1 < below.Done; j++ {
			n := Node{L: l, I: j}
			if !st.built(n) && startable(n) {
				take(n)
			}
		}
		// Parents whose children finished out of order.
		for _, c := range below.More {
			if free <= 0 {
				break
			}
			if c%2 != 0 || c/2 < done {
				continue
			}
			n := Node{L: l, I: c / 2}
			a, b := n.Children()
			if st.built(a) && st.built(b) && !st.built(n) && startable(n) {
				take(n)
			}
		}
	}
	return out, dropped
}
