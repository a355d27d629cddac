package memory

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"math/bits"
	"sort"
)

// run is a stretch of a partition: the N nodes (L, I) ... (L, I+N-1). Saved
// partitions are mostly long runs of equal-level nodes, so a run keeps the
// state item small however long the chat gets.
type run struct {
	L int
	I int64
	N int64
}

func (r run) MarshalJSON() ([]byte, error) { return json.Marshal([3]int64{int64(r.L), r.I, r.N}) }

func (r *run) UnmarshalJSON(b []byte) error {
	var a [3]int64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	r.L, r.I, r.N = int(a[0]), a[1], a[2]
	return nil
}

func (r run) end() int64 { return (r.I + r.N) << r.L }

// partition is a saved view: nodes tiling [0, T) oldest first, its rendered
// size, and whether a sawtooth batch is open. It only ever changes by
// appending leaves at its end and by merging sibling pairs in a batch: it is
// never refolded, so a prompt that held it keeps its cached prefix.
type partition struct {
	Runs []run `json:"r,omitempty"`
	// Size is the rendered size in bytes: the sum over its lines of
	// len("<label>|<line>\n"), placeholders counted as they render.
	Size int64 `json:"s"`
	// Open: a batch passed the high mark and has not reached its target.
	Open bool `json:"o,omitempty"`
	// Merges counts the merges this partition has made, for status.
	Merges int64 `json:"m,omitempty"`
}

// end is one past the last entry the partition covers.
func (p *partition) end() int64 {
	if len(p.Runs) == 0 {
		return 0
	}
	return p.Runs[len(p.Runs)-1].end()
}

// lines is the number of lines it renders.
func (p *partition) lines() int64 {
	var n int64
	for _, r := range p.Runs {
		n += r.N
	}
	return n
}

// nodes lists the partition's nodes in order.
func (p *partition) nodes() []Node {
	out := make([]Node, 0, p.lines())
	for _, r := range p.Runs {
		for k := int64(0); k < r.N; k++ {
			out = append(out, Node{L: r.L, I: r.I + k})
		}
	}
	return out
}

// setNodes saves nodes as runs.
func (p *partition) setNodes(nodes []Node) {
	p.Runs = p.Runs[:0]
	for _, n := range nodes {
		if k := len(p.Runs) - 1; k >= 0 && p.Runs[k].L == n.L && p.Runs[k].I+p.Runs[k].N == n.I {
			p.Runs[k].N++
			continue
		}
		p.Runs = append(p.Runs, run{L: n.L, I: n.I, N: 1})
	}
}

// appendLeaves adds the unbuilt leaves [from, to) at the end, as
// placeholders.
func (p *partition) appendLeaves(from, to int64) {
	if to <= from {
		return
	}
	if k := len(p.Runs) - 1; k >= 0 && p.Runs[k].L == 0 && p.Runs[k].I+p.Runs[k].N == from {
		p.Runs[k].N += to - from
	} else {
		p.Runs = append(p.Runs, run{L: 0, I: from, N: to - from})
	}
	p.Size += leafPlaceholderSizes(from, to)
}

// covering returns the partition's node holding entry id.
func (p *partition) covering(id int64) (Node, bool) {
	k := sort.Search(len(p.Runs), func(k int) bool { return p.Runs[k].end() > id })
	if k == len(p.Runs) || id < 0 {
		return Node{}, false
	}
	r := p.Runs[k]
	return Node{L: r.L, I: id >> r.L}, true
}

// before lists the partition's nodes that end at or before end, in order.
func (p *partition) before(end int64) []Node {
	var out []Node
	for _, r := range p.Runs {
		for k := int64(0); k < r.N; k++ {
			n := Node{L: r.L, I: r.I + k}
			if n.End() > end {
				return out
			}
			out = append(out, n)
		}
	}
	return out
}

// mergeSizes tells a batch what a merge changes: the rendered size of the
// parent's line and of its two children's lines together. The parent is
// built when asked.
type mergeSizes func(parent Node) (parentSize, childrenSize int64, err error)

// batch runs the sawtooth. A closed batch opens when the size passes high
// (or, with force, when it passes low: the compaction view follows every
// chat-view merge). An open batch replaces the most due mergeable pair with
// its parent until the size is at most low; when no pair is mergeable it
// stays open and resumes at the next change. A pair is mergeable when it is
// two adjacent siblings at one level, the first of even index, and their
// parent is built. Most due is the highest (t - last) / 2^l, where last is
// the pair's last entry and l the children's level; ties go to the oldest.
// It returns the number of merges made.
func (p *partition) batch(t, high, low int64, force bool, built func(Node) bool, sizes mergeSizes) (int, error) {
	if !p.Open && (p.Size > high || (force && p.Size > low)) {
		p.Open = true
	}
	if !p.Open {
		return 0, nil
	}
	nodes := p.nodes()
	m := newMerger(nodes, t, built)
	merged := 0
	for p.Size > low {
		k, ok := m.pop()
		if !ok {
			break
		}
		parent := m.nodes[k].Parent()
		ps, cs, err := sizes(parent)
		if err != nil {
			if merged > 0 {
				// Keep what was merged; the batch resumes later.
				p.setNodes(m.result())
				p.Merges += int64(merged)
			}
			return merged, err
		}
		m.merge(k)
		p.Size += ps - cs
		merged++
	}
	if merged > 0 {
		p.setNodes(m.result())
		p.Merges += int64(merged)
	}
	if p.Size <= low {
		p.Open = false
	}
	return merged, nil
}

// merger finds most-due pairs in a list of nodes with a heap; a merge only
// changes the pairs next to it, so a batch costs O(n log n), not O(n^2).
type merger struct {
	nodes      []Node
	alive      []bool
	prev, next []int
	t          int64
	built      func(Node) bool
	pairs      pairHeap
}

func newMerger(nodes []Node, t int64, built func(Node) bool) *merger {
	m := &merger{nodes: nodes, alive: make([]bool, len(nodes)), prev: make([]int, len(nodes)), next: make([]int, len(nodes)), t: t, built: built}
	for k := range nodes {
		m.alive[k] = true
		m.prev[k] = k - 1
		m.next[k] = k + 1
	}
	for k := range nodes {
		m.push(k)
	}
	return m
}

// push records the pair starting at slot k when it is mergeable.
func (m *merger) push(k int) {
	if k < 0 || k >= len(m.nodes) || !m.alive[k] {
		return
	}
	j := m.next[k]
	if j >= len(m.nodes) {
		return
	}
	a, b := m.nodes[k], m.nodes[j]
	if a.L != b.L || a.I%2 != 0 || b.I != a.I+1 || !m.built(a.Parent()) {
		return
	}
	heap.Push(&m.pairs, pair{slot: k, left: a, right: b, due: newDue(m.t-b.End()+1, a.L)})
}

// next returns the slot of the most due pair still standing.
func (m *merger) pop() (int, bool) {
	for m.pairs.Len() > 0 {
		top := heap.Pop(&m.pairs).(pair)
		k := top.slot
		if !m.alive[k] || m.nodes[k] != top.left {
			continue
		}
		j := m.next[k]
		if j >= len(m.nodes) || m.nodes[j] != top.right {
			continue
		}
		return k, true
	}
	return 0, false
}

// merge replaces the pair at slot k with its parent.
func (m *merger) merge(k int) {
	j := m.next[k]
	m.nodes[k] = m.nodes[k].Parent()
	m.alive[j] = false
	m.next[k] = m.next[j]
	if m.next[k] < len(m.nodes) {
		m.prev[m.next[k]] = k
	}
	m.push(m.prev[k])
	m.push(k)
}

func (m *merger) result() []Node {
	out := make([]Node, 0, len(m.nodes))
	for k, n := range m.nodes {
		if m.alive[k] {
			out = append(out, n)
		}
	}
	return out
}

// due is (age / 2^level), compared exactly: age is t - last >= 1.
type due struct {
	age   int64
	level int
}

func newDue(age int64, level int) due { return due{age: age, level: level} }

// more reports whether d is more due than e: age_d / 2^l_d > age_e / 2^l_e,
// that is age_d * 2^l_e > age_e * 2^l_d, in 128 bits.
func (d due) more(e due) bool {
	dh, dl := mul128(uint64(d.age), e.level)
	eh, el := mul128(uint64(e.age), d.level)
	if dh != eh {
		return dh > eh
	}
	return dl > el
}

func (d due) equal(e due) bool { return !d.more(e) && !e.more(d) }

// mul128 is x * 2^shift as a 128-bit number (high, low).
func mul128(x uint64, shift int) (uint64, uint64) {
	if shift >= 64 {
		return x << (shift - 64), 0
	}
	return bits.Mul64(x, 1<<uint(shift))
}

type pair struct {
	slot        int
	left, right Node
	due         due
}

type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	if !h[a].due.equal(h[b].due) {
		return h[a].due.more(h[b].due)
	}
	return h[a].left.Start() < h[b].left.Start()
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// check verifies that the partition tiles [0, t) with aligned nodes.
func (p *partition) check(t int64) error {
	var at int64
	for _, r := range p.Runs {
		if r.N <= 0 || r.L < 0 || r.I < 0 {
			return fmt.Errorf("partition run %v is malformed", r)
		}
		if r.I<<r.L != at {
			return fmt.Errorf("partition run %v starts at %d, want %d", r, r.I<<r.L, at)
		}
		at = r.end()
	}
	if at != t {
		return fmt.Errorf("partition covers [0, %d), want [0, %d)", at, t)
	}
	return nil
}
