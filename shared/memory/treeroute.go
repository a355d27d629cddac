package memory

import (
	"context"
	"net/http"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
)

// Tree pages: TreePage nodes by default, at most MaxTreePage.
const (
	TreePage    = 64
	MaxTreePage = 256
)

// TreeArgs choose a page of one level: Level (-1: the top level), the
// first node's index From, and at most Limit nodes.
type TreeArgs struct {
	Level int
	From  int64
	Limit int
}

// Tree reads a page of one level of a chat's summary tree: each complete
// node's state and, when built, its line.
func (m *Memory) Tree(ctx context.Context, tenant, chat string, a TreeArgs) (wire.Tree, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.Tree{}, err
	}
	return m.tree(ctx, c, a)
}

// tree is Tree of the incarnation c.
func (m *Memory) tree(ctx context.Context, c chatid.Chat, a TreeArgs) (wire.Tree, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return wire.Tree{}, err
	}
	out := wire.Tree{Entries: st.T, Levels: []wire.TreeLevel{}, Nodes: []wire.TreeNode{}}
	for l := 0; l < 63 && st.T>>l > 0; l++ {
		var built int64
		if l < len(st.Levels) {
			built = st.Levels[l].Done + int64(len(st.Levels[l].More))
		}
		out.Levels = append(out.Levels, wire.TreeLevel{Level: l, Nodes: st.T >> l, Built: built})
	}
	level := a.Level
	if level < 0 {
		level = max(len(out.Levels)-1, 0)
	}
	out.Level = level
	if level >= len(out.Levels) {
		if a.Level >= 0 && st.T > 0 {
			return wire.Tree{}, api.BadRequest("level", "level %d has no complete node: the chat's %d entries make levels 0 to %d", a.Level, st.T, len(out.Levels)-1)
		}
		return out, nil
	}
	count := st.T >> level
	if a.From >= count && a.From > 0 {
		return wire.Tree{}, api.BadRequest("from", "from %d is past level %d, which has %d nodes", a.From, level, count)
	}
	to := min(count, a.From+int64(a.Limit))
	nodes := make([]Node, 0, to-a.From)
	var toRead []Node
	for i := a.From; i < to; i++ {
		n := Node{L: level, I: i}
		nodes = append(nodes, n)
		if st.built(n) {
			toRead = append(toRead, n)
		}
	}
	rows, err := m.rows(ctx, c, st.Gen, toRead)
	if err != nil {
		return wire.Tree{}, err
	}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, treeNode(st, n, rows))
	}
	if to < count {
		out.Next = &to
	}
	return out, nil
}

// treeNode is n's state as the tree route shows it.
func treeNode(st *chatState, n Node, rows map[Node]nodeInfo) wire.TreeNode {
	tn := wire.TreeNode{Node: n.Label(), Level: n.L, Index: n.I, Start: n.Start(), Count: n.Count(), Status: wire.NodeUnbuilt}
	if info, ok := rows[n]; ok {
		tn.Line, tn.Images = info.line, info.images
		switch {
		case info.mechanical:
			tn.Status = wire.NodeMechanical
		case info.verbatim:
			tn.Status = wire.NodeVerbatim
		default:
			tn.Status = wire.NodeBuilt
		}
		return tn
	}
	if k, ok := st.retryOf(n); ok {
		r := st.Retries[k]
		next := time.UnixMilli(r.At).UTC()
		tn.Failures, tn.Refusals, tn.Error, tn.Next = r.Failures, r.Refusals, r.Err, &next
		tn.Status = wire.NodeRetrying
		if r.Refusals > 0 {
			tn.Status = wire.NodeRefused
		}
	}
	if _, ok := st.claimOf(n); ok {
		tn.Status = wire.NodeBuilding
	}
	return tn
}

func (m *Memory) handleTree(w http.ResponseWriter, r *http.Request) error {
	a, err := treeArgs(r)
	if err != nil {
		return err
	}
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	t, err := m.tree(r.Context(), c, a)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, t)
	return nil
}

// treeArgs reads ?level=&from=&limit=.
func treeArgs(r *http.Request) (TreeArgs, error) {
	a := TreeArgs{Level: -1, Limit: TreePage}
	level, err := api.QueryInt(r, "level", 0, 62, -1)
	if err != nil {
		return a, err
	}
	from, err := api.QueryInt(r, "from", 0, api.MaxSeq, 0)
	if err != nil {
		return a, err
	}
	n, err := api.QueryInt(r, "limit", 1, MaxTreePage, TreePage)
	if err != nil {
		return a, err
	}
	a.Level, a.From, a.Limit = int(level), from, int(n)
	return a, nil
}
