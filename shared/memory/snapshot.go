package memory

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// The view snapshot is one item in the chat incarnation's partition
// (store.ViewSK) that holds the lines of the chat view's built nodes as a
// view last read them. A process with none of them in its line cache, as a
// process serving many chats mostly is, reads the state, the snapshot and
// the rows of the few lines built since, instead of a row per line.
//
// It is never served as the view. The view is the state's, read in the
// same request: its nodes, which of them are built, its counts. The
// snapshot only gives the words of nodes the state says are built, looked
// up by node, and a node's line never changes once written (the line cache
// rests on the same). So an old snapshot can only lack lines, which are
// then read from their rows: it cannot show a line the view does not hold
// nor fill a placeholder.
//
// The view read writes it: once the stored snapshot lacks snapshotRefresh
// of the view's lines, a new one replaces it, conditional on the version
// read (a lost race leaves the winner's). Like a node row, it is created
// only while its incarnation is current; a deletion removes it with the
// rest of the incarnation's partition.
const (
	// snapshotRead: the snapshot is read when it holds at least this many
	// of the lines missing from the line cache (or when this process does
	// not know what it holds and that many are missing). Fewer are read
	// as rows: a read unit each, no more than the snapshot's few.
	snapshotRead = 16
	// snapshotRefresh: a view writes a new snapshot once the stored one
	// lacks this many of its lines. A turn adds a few; a merge pass many.
	snapshotRefresh = 32
	// snapshotBytes bounds a snapshot's encoding before it is compressed
	// (compression only shrinks text): it holds the view's first lines
	// that fit.
	snapshotBytes = store.ItemBudget - 1<<10
	// snapshotMemos bounds the chats whose stored snapshot a process
	// remembers (its version and nodes, a few hundred bytes).
	snapshotMemos = 4096
)

// snapshotMemo is what a process knows of a chat's stored snapshot.
type snapshotMemo struct {
	// version is the stored item's; 0 when none is stored.
	version int64
	// held are the nodes whose lines it holds, in view order.
	held []run
}

// snapshotBody is a snapshot as stored, before compression: a line per
// node of Nodes, in order.
type snapshotBody struct {
	Lines []snapshotLine `json:"l"`
	Nodes []run          `json:"n"`
	// Gen is the erasure generation of the state the view read
	// (chatState.Gen): a view of another reads none of its lines.
	Gen int64 `json:"g,omitempty"`
}

// snapshotLine is what a view and the line cache keep of a node's row.
type snapshotLine struct {
	Line       string   `json:"t"`
	Child      [2]int   `json:"c,omitempty"`
	Verbatim   bool     `json:"v,omitempty"`
	Mechanical bool     `json:"m,omitempty"`
	Images     []string `json:"im,omitempty"`
}

// chatView is an incarnation as one view read it: at the erasure
// generation of the state it read.
type chatView struct {
	c   chatid.Chat
	gen int64
}

func snapshotKey(c chatid.Chat) store.Key {
	return store.Key{PK: c.PK(), SK: store.ViewSK}
}

// viewRows reads the lines of the view's built nodes want, in view order:
// from the line cache, then from the snapshot when it holds enough of
// those missing, then from their rows. It then replaces the snapshot when
// it lacks snapshotRefresh of them. A node with no row is absent from the
// answer, as from rows.
func (m *Memory) viewRows(ctx context.Context, c chatid.Chat, gen int64, want []Node) (map[Node]nodeInfo, error) {
	pk := cacheKey(c, gen)
	out := make(map[Node]nodeInfo, len(want))
	var missing []Node
	for _, n := range want {
		if info, ok := m.lines.get(pk, n); ok {
			out[n] = info
		} else {
			missing = append(missing, n)
		}
	}
	memo, known := m.snapshots.get(pk)
	read := wantSnapshot(memo, known, len(want), missing)
	if read {
		var err error
		if memo, err = m.readSnapshot(ctx, c, gen, missing, out); err != nil {
			return nil, err
		}
		known = true
		m.snapshots.put(pk, memo)
		missing = slices.DeleteFunc(missing, func(n Node) bool { _, ok := out[n]; return ok })
	}
	rows, err := m.rows(ctx, c, gen, missing)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, rows)
	if known {
		m.refreshSnapshot(ctx, chatView{c, gen}, memo, read, viewLines{want: want, got: out})
	}
	return out, nil
}

// wantSnapshot decides whether a view reads the snapshot: when it holds
// snapshotRead of the lines missing from the cache, or, not knowing what
// it holds, when that many are missing or the view is large enough to
// have one worth keeping up.
func wantSnapshot(memo snapshotMemo, known bool, want int, missing []Node) bool {
	if !known {
		return len(missing) >= snapshotRead || want >= snapshotRefresh
	}
	if len(missing) < snapshotRead || memo.version == 0 {
		return false
	}
	held := heldNodes(memo.held)
	n := 0
	for _, x := range missing {
		if held[x] {
			n++
		}
	}
	return n >= snapshotRead
}

func heldNodes(runs []run) map[Node]bool {
	p := partition{Runs: runs}
	held := make(map[Node]bool, p.lines())
	for _, n := range p.nodes() {
		held[n] = true
	}
	return held
}

// readSnapshot reads the stored snapshot into out for the nodes of
// missing it holds (and into the line cache), and returns what it holds.
// A snapshot that cannot be decoded is logged and read as holding
// nothing; the next refresh replaces it.
func (m *Memory) readSnapshot(ctx context.Context, c chatid.Chat, gen int64, missing []Node, out map[Node]nodeInfo) (snapshotMemo, error) {
	it, err := m.table.Get(ctx, snapshotKey(c))
	if errors.Is(err, store.ErrNotFound) {
		return snapshotMemo{}, nil
	}
	if err != nil {
		return snapshotMemo{}, fmt.Errorf("reading the view snapshot of %s: %w", c.ID, err)
	}
	body, err := decodeSnapshot(it.Body)
	if err != nil {
		m.logger.WarnContext(ctx, "memory: view snapshot unreadable; reading rows", "chat", c.ID, "err", err)
		return snapshotMemo{version: it.Version}, nil
	}
	if body.Gen != gen {
		// Written before an erasure (or read by a view before it): it may
		// hold lines taken back; it is read as holding nothing.
		return snapshotMemo{version: it.Version}, nil
	}
	wanted := make(map[Node]bool, len(missing))
	for _, n := range missing {
		wanted[n] = true
	}
	pk := cacheKey(c, gen)
	p := partition{Runs: body.Nodes}
	for k, n := range p.nodes() {
		if !wanted[n] {
			continue
		}
		l := body.Lines[k]
		info := nodeInfo{line: l.Line, child: l.Child, verbatim: l.Verbatim, mechanical: l.Mechanical, images: l.Images}
		m.lines.put(pk, n, info)
		out[n] = info
	}
	return snapshotMemo{version: it.Version, held: body.Nodes}, nil
}

// viewLines are the lines a view read: want, in view order, as found in
// got (a node with no row is absent from got).
type viewLines struct {
	want []Node
	got  map[Node]nodeInfo
}

// lacking counts the view's lines read that the snapshot memo tells of
// does not hold.
func (v viewLines) lacking(memo snapshotMemo) int {
	held, n := heldNodes(memo.held), 0
	for _, x := range v.want {
		if _, ok := v.got[x]; ok && !held[x] {
			n++
		}
	}
	return n
}

// refreshSnapshot writes a snapshot of the view's lines when it holds
// snapshotRefresh lines the stored one (memo; read by this view when read)
// lacks. It is best effort: the view is read already, and a failed write
// only leaves the next view reading more rows.
func (m *Memory) refreshSnapshot(ctx context.Context, v chatView, memo snapshotMemo, read bool, view viewLines) {
	c, gen := v.c, v.gen
	if view.lacking(memo) < snapshotRefresh {
		return
	}
	if !read {
		// What this process knows may be old: another process may have
		// written since. A failed conditional write costs as much as a
		// write, reading the snapshot a fifth of that per byte.
		var err error
		if memo, err = m.readSnapshot(ctx, c, gen, nil, view.got); err != nil {
			m.logger.WarnContext(ctx, "memory: reading the view snapshot", "chat", c.ID, "err", err)
			return
		}
		m.snapshots.put(cacheKey(c, gen), memo)
		if view.lacking(memo) < snapshotRefresh {
			return
		}
	}
	body, nodes, err := encodeSnapshot(gen, view.want, view.got)
	if err != nil {
		m.logger.WarnContext(ctx, "memory: encoding the view snapshot", "chat", c.ID, "err", err)
		return
	}
	if newNodes(nodes, memo) < snapshotRefresh {
		return // the lines past the byte bound are what it lacks
	}
	m.writeSnapshot(ctx, chatView{c, gen}, memo.version, body, nodes)
}

// newNodes counts the nodes of p the snapshot memo tells of does not hold.
func newNodes(p partition, memo snapshotMemo) int {
	held, n := heldNodes(memo.held), 0
	for _, x := range p.nodes() {
		if !held[x] {
			n++
		}
	}
	return n
}

// writeSnapshot replaces the stored snapshot at version (none when 0)
// with body, holding nodes, and remembers what it wrote; a lost race is
// forgotten, to be read again.
func (m *Memory) writeSnapshot(ctx context.Context, v chatView, version int64, body []byte, nodes partition) {
	c, gen := v.c, v.gen
	it := store.Item{Key: snapshotKey(c), Version: version + 1, Body: body}
	var err error
	if version == 0 {
		// Created only while the incarnation is current, as a node row
		// is: a chat deleted under this view keeps no snapshot of it.
		current, cerr := m.ids.IsCurrent(ctx, c)
		if cerr != nil || !current {
			return
		}
		err = m.table.Create(ctx, it)
	} else {
		err = m.table.Update(ctx, it)
	}
	switch {
	case err == nil:
		m.snapshots.put(cacheKey(c, gen), snapshotMemo{version: it.Version, held: nodes.Runs})
	case errors.Is(err, store.ErrConditionFailed):
		// Another view wrote one first, or the chat was deleted: read it
		// again next time.
		m.snapshots.forget(cacheKey(c, gen))
	default:
		m.logger.WarnContext(ctx, "memory: writing the view snapshot", "chat", c.ID, "err", err)
	}
}

// encodeSnapshot encodes the lines of want found in got, in order, as many
// as fit snapshotBytes, and returns them compressed with the nodes held.
func encodeSnapshot(gen int64, want []Node, got map[Node]nodeInfo) ([]byte, partition, error) {
	var held []Node
	body := snapshotBody{Gen: gen}
	size := 0
	for _, n := range want {
		info, ok := got[n]
		if !ok {
			continue
		}
		l := snapshotLine{Line: info.line, Child: info.child, Verbatim: info.verbatim, Mechanical: info.mechanical, Images: info.images}
		b, err := rawjson.Of(l)
		if err != nil {
			return nil, partition{}, err
		}
		// Each node also costs its line's comma and, at most, a run of
		// its own in Nodes.
		if size += len(b) + 1 + 64; size > snapshotBytes {
			break
		}
		held = append(held, n)
		body.Lines = append(body.Lines, l)
	}
	var p partition
	p.setNodes(held)
	body.Nodes = p.Runs
	raw, err := rawjson.Of(body)
	if err != nil {
		return nil, partition{}, err
	}
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, partition{}, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, partition{}, err
	}
	if err := zw.Close(); err != nil {
		return nil, partition{}, err
	}
	return buf.Bytes(), p, nil
}

// decodeSnapshot decompresses and checks a stored snapshot.
func decodeSnapshot(stored []byte) (snapshotBody, error) {
	zr := flate.NewReader(bytes.NewReader(stored))
	defer zr.Close()
	// A snapshot never decodes past the bound it was encoded under.
	raw, err := io.ReadAll(io.LimitReader(zr, 2*snapshotBytes+1))
	if err != nil {
		return snapshotBody{}, fmt.Errorf("decompressing: %w", err)
	}
	if len(raw) > 2*snapshotBytes {
		return snapshotBody{}, errors.New("larger than any snapshot written")
	}
	var body snapshotBody
	if err := json.Unmarshal(raw, &body); err != nil {
		return snapshotBody{}, err
	}
	var count int64
	for _, r := range body.Nodes {
		if r.L < 0 || r.L > 62 || r.I < 0 || r.N <= 0 || r.N > int64(len(body.Lines)) {
			return snapshotBody{}, fmt.Errorf("node run %v is malformed", r)
		}
		count += r.N
	}
	if count != int64(len(body.Lines)) {
		return snapshotBody{}, fmt.Errorf("%d nodes for %d lines", count, len(body.Lines))
	}
	return body, nil
}
