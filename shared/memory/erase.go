package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
)

// Erased takes back every line built from the entries ids of the
// incarnation c, which the log has just erased: in one write of the
// chat's state it counts a new erasure generation (so no process's cache
// serves a line read before it) and marks each built or building
// ancestor of each entry stale (not built: a placeholder in the views,
// the tree and zoom from then on, whatever the model does); then it
// deletes their rows and the view snapshot, and queues their rebuilds: the
// leaf from the erased entry, each merge above from its children, a
// model call per level. It returns the nodes taken back, children first;
// LinesRebuilt tells when they are built again. Calling it again for the same
// ids takes them back again (a harmless rebuild).
func (m *Memory) Erased(ctx context.Context, c chatid.Chat, ids []int64) ([]Node, error) {
	var (
		taken []Node
		sends []Node
		gen   int64
	)
	lines, err := m.leafLines(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	_, err = m.states.update(ctx, c, func(st *chatState) error {
		st.Gen++
		gen = st.Gen
		taken = st.takeBack(ids, gen, lines)
		sends, _ = st.schedule(m.now(), m.claimLease)
		return nil
	})
	if errors.Is(err, errRetired) {
		return nil, nil // the chat was deleted: nothing of it is kept
	}
	if err != nil {
		return nil, fmt.Errorf("memory: erasing from %s: %w", c.ID, err)
	}
	if err := m.unindex(ctx, c, ids); err != nil {
		return nil, err
	}
	if err := m.unembed(ctx, c, ids); err != nil {
		return nil, err
	}
	sortNodes(taken)
	for _, n := range taken {
		if err := m.dropTaken(ctx, c, n, gen, lines); err != nil {
			return nil, err
		}
	}
	if err := m.table.Delete(ctx, snapshotKey(c), 0); err != nil {
		return nil, fmt.Errorf("memory: deleting the view snapshot of %s: %w", c.ID, err)
	}
	m.changes.signal(c)
	if err := m.send(ctx, c, sends); err != nil {
		// The claims lapse and the next pump sends them again.
		m.logger.WarnContext(ctx, "memory: queueing rebuilds after an erasure", "chat", c.ID, "err", err)
	}
	return taken, nil
}

// leafRow is a built leaf's row as an erasure read it before taking it
// back: its line's length and its version.
type leafRow struct {
	line    int
	version int64
}

// leafLines reads the rows of the leaves of the entries ids that are
// built, by node: what their taking back takes out of the views' sizes,
// and the version Erased deletes.
func (m *Memory) leafLines(ctx context.Context, c chatid.Chat, ids []int64) (map[Node]leafRow, error) {
	lines := map[Node]leafRow{}
	for _, id := range ids {
		n := Node{L: 0, I: id}
		row, version, err := m.readRowVersion(ctx, c, n)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("memory: reading node %s of %s: %w", n.Label(), c.ID, err)
		}
		lines[n] = leafRow{line: len(Line(row.Text)), version: version}
	}
	return lines, nil
}

// takeBack marks stale, as of the erasure of generation gen, every node
// built (or being built) from the entries ids, dropping their claims, and
// returns them. lines are the lengths of the built leaves' lines
// (leafLines): a leaf built until now is its placeholder in the views'
// sizes from now until it is built again (countBuilt).
func (st *chatState) takeBack(ids []int64, gen int64, lines map[Node]leafRow) []Node {
	var taken []Node
	seen := map[Node]bool{}
	for _, id := range ids {
		for l := 0; l < 63; l++ {
			n := Node{L: l, I: id >> l}
			if !n.Complete(st.T) {
				break
			}
			if seen[n] {
				continue
			}
			seen[n] = true
			_, claimed := st.claimOf(n)
			k, stale := st.staleOf(n)
			if !st.everBuilt(n) && !claimed && !stale {
				continue
			}
			taken = append(taken, n)
			st.dropClaim(n)
			if stale {
				st.Stale[k].G = gen
			} else {
				st.Stale = append(st.Stale, staleNode{L: n.L, I: n.I, G: gen})
				if st.everBuilt(n) {
					st.unbuilt(n, lines)
				}
			}
		}
	}
	return taken
}

// unbuilt counts the built node n as a placeholder until it is built
// again (markBuilt), in the views' sizes too when it is a leaf whose line
// is in lines.
func (st *chatState) unbuilt(n Node, lines map[Node]leafRow) {
	st.Built--
	if lr, ok := lines[n]; ok && n.L == 0 {
		delta := lineSize(n, lr.line) - placeholderSize(n)
		st.View.Size -= delta
		st.Compact.Size -= delta
	}
}

// dropTaken deletes the row of n, taken back by the erasure of
// generation gen, unless built since: a leaf's row as leafLines read it
// (before gen was counted, so built before it), any other as
// dropStaleRow finds it.
func (m *Memory) dropTaken(ctx context.Context, c chatid.Chat, n Node, gen int64, lines map[Node]leafRow) error {
	if lr, ok := lines[n]; ok {
		return m.dropRow(ctx, c, n, lr.version)
	}
	return m.dropStaleRow(ctx, c, n, gen)
}

// dropStaleRow deletes the row of n when it was built before the
// erasure of generation gen took it back; a row built since stays.
func (m *Memory) dropStaleRow(ctx context.Context, c chatid.Chat, n Node, gen int64) error {
	row, version, err := m.readRowVersion(ctx, c, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory: reading node %s of %s: %w", n.Label(), c.ID, err)
	}
	if row.Gen >= gen {
		return nil
	}
	return m.dropRow(ctx, c, n, version)
}

// dropRow deletes the row of n at version; a row changed since stays.
func (m *Memory) dropRow(ctx context.Context, c chatid.Chat, n Node, version int64) error {
	err := m.table.Delete(ctx, nodeKey(c, n), version)
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("memory: deleting node %s of %s: %w", n.Label(), c.ID, err)
	}
	return nil
}

// EraseLines is Erased answering the nodes' labels ("<start>+<count>").
func (m *Memory) EraseLines(ctx context.Context, c chatid.Chat, ids []int64) ([]string, error) {
	nodes, err := m.Erased(ctx, c, ids)
	labels := make([]string, len(nodes))
	for k, n := range nodes {
		labels[k] = n.Label()
	}
	return labels, err
}

// LinesRebuilt counts the nodes (by label) an erasure took back that are
// built again; a chat with no state (deleted) has them all.
func (m *Memory) LinesRebuilt(ctx context.Context, c chatid.Chat, labels []string) (int, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, label := range labels {
		node, ok := parseLabel(label)
		if !ok {
			return 0, fmt.Errorf("memory: %q is not a node label", label)
		}
		if _, stale := st.staleOf(node); !stale {
			n++
		}
	}
	return n, nil
}

// parseLabel reads a node's label back.
func parseLabel(s string) (Node, bool) {
	a, b, ok := strings.Cut(s, "+")
	start, err1 := strconv.ParseInt(a, 10, 64)
	count, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || start < 0 || count < 1 || count&(count-1) != 0 || start%count != 0 {
		return Node{}, false
	}
	l := log2(count)
	return Node{L: l, I: start >> l}, true
}
