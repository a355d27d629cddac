package memory

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/model"
)

func TestTreeRouteShowsEachNodesStateAndItsLastError(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		switch c.Label {
		case "1+1":
			return Compacted{}, &model.Error{Retryable: true, Err: errors.New("model down")}
		case "2+1":
			return Compacted{Attempts: 1}, model.RefusedError(model.ErrRefused)
		}
		return Compacted{Line: "summary of " + c.Label, Attempts: 1, Model: "scripted"}, nil
	}
	f.append(t, "user", long(0), long(1), long(2), "short")
	f.deliverAll(t)

	rec, _ := f.serve(t, "GET", "/v1/chats/c1/tree?level=0", nil)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var tree wire.Tree
	if err := json.Unmarshal(rec.Body.Bytes(), &tree); err != nil {
		t.Fatal(err)
	}
	if tree.Entries != 4 || tree.Level != 0 || len(tree.Levels) != 3 || tree.Next != nil {
		t.Fatalf("tree %+v", tree)
	}
	if l := tree.Levels[0]; l.Nodes != 4 || l.Built != 2 {
		t.Errorf("level 0: %+v, want 4 nodes, 2 built", l)
	}
	want := []struct{ node, status, line, err string }{
		{"0+1", wire.NodeBuilt, "summary of 0+1", ""},
		{"1+1", wire.NodeRetrying, "", "model down"},
		{"2+1", wire.NodeRefused, "", "refused"},
		{"3+1", wire.NodeVerbatim, "user: short", ""},
	}
	if len(tree.Nodes) != len(want) {
		t.Fatalf("%d nodes, want %d: %+v", len(tree.Nodes), len(want), tree.Nodes)
	}
	for i, w := range want {
		n := tree.Nodes[i]
		if n.Node != w.node || n.Status != w.status || n.Line != w.line || !strings.Contains(n.Error, w.err) {
			t.Errorf("node %d: %+v, want %s %s %q error %q", i, n, w.node, w.status, w.line, w.err)
		}
		if w.err != "" && (n.Failures != 1 || n.Next == nil) {
			t.Errorf("node %s: failures %d next %v, want 1 and a time", n.Node, n.Failures, n.Next)
		}
	}
	if tree.Nodes[2].Refusals != 1 || tree.Nodes[1].Refusals != 0 {
		t.Errorf("refusals %d and %d, want 1 and 0", tree.Nodes[2].Refusals, tree.Nodes[1].Refusals)
	}

	// Without a level the top one; a page names the next.
	_, out := f.serve(t, "GET", "/v1/chats/c1/tree", nil)
	if out["level"] != 2.0 || len(out["nodes"].([]any)) != 1 {
		t.Errorf("default level: %v", out)
	}
	_, out = f.serve(t, "GET", "/v1/chats/c1/tree?level=0&from=1&limit=2", nil)
	if nodes := out["nodes"].([]any); len(nodes) != 2 || nodes[0].(map[string]any)["node"] != "1+1" || out["next"] != 3.0 {
		t.Errorf("page: %v", out)
	}
}

func TestTreeRouteRefusesBadArgumentsNamingThem(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "a", "b")
	f.deliverAll(t)
	for _, tc := range []struct{ query, field string }{
		{"level=x", "level"},
		{"level=-1", "level"},
		{"level=2", "level"},
		{"from=-1", "from"},
		{"level=0&from=2", "from"},
		{"limit=0", "limit"},
		{"limit=257", "limit"},
	} {
		rec, _ := f.serve(t, "GET", "/v1/chats/c1/tree?"+tc.query, nil)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.query, rec.Code, rec.Body, tc.field)
		}
	}
	// A chat with no entries has an empty tree, not an error.
	rec, out := f.serve(t, "GET", "/v1/chats/empty/tree", nil)
	if rec.Code != 200 || out["entries"] != 0.0 || len(out["nodes"].([]any)) != 0 {
		t.Errorf("empty chat: %d %v", rec.Code, out)
	}
}

func TestTreeRouteMarksAMechanicalLine(t *testing.T) {
	f := newFixture(t)
	f.comp.script = func(CompactRequest) (Compacted, error) {
		return Compacted{Attempts: 1}, model.RefusedError(model.ErrRefused)
	}
	f.append(t, "user", long(0))
	f.queue.take()
	for k := 0; k < RefusalLimit; k++ {
		_ = build(t, f, Node{0, 0})
		f.clock.Add(DefaultRetry)
	}
	tree, err := f.m.Tree(t.Context(), f.tenant, f.chat, TreeArgs{Level: 0, Limit: TreePage})
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Nodes) != 1 || tree.Nodes[0].Status != wire.NodeMechanical || !strings.HasPrefix(tree.Nodes[0].Line, "[mechanical") {
		t.Fatalf("nodes %+v, want one mechanical line", tree.Nodes)
	}
}
