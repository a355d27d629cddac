package memory

import (
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
// size, and whether a merge pass is open. It only ever changes by
// appending leaves at its end and by merging sibling pairs in a merge pass:
// it is never refolded, so a prompt that held it keeps its cached prefix.
type partition struct {
	Runs []run `json:"r,omitempty"`
	// Size is the rendered size in bytes: the sum over its lines of
	// len("<label>|<line>\n"), placeholders counted as they render.
	Size int64 `json:"s"`
	// Open: a merge pass started past the high mark and has not reached its
	// target.
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

// lastBefore lists, in order, the last (at most max) of the partition's
// nodes that end at or before end, and how many earlier ones it left out.
func (p *partition) lastBefore(end int64, max int) ([]Node, int64) {
	var out []Node
	var omitted int64
	for k := len(p.Runs) - 1; k >= 0 && len(out) < max; k-- {
		r := p.Runs[k]
		// The nodes of r that end at or before end: indices below hi.
		hi := min(r.I+r.N, end>>r.L)
		for j := hi - 1; j >= r.I && len(out) < max; j-- {
			out = append(out, Node{L: r.L, I: j})
		}
	}
	// Count what was left out, run by run, without listing it.
	if len(out) == max {
		first := out[len(out)-1]
		for _, r := range p.Runs {
			if r.I<<r.L >= first.Start() {
				break
			}
			hi := min(r.I+r.N, first.Start()>>r.L)
			omitted += max64(0, hi-r.I)
		}
	}
	for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
		out[a], out[b] = out[b], out[a]
	}
	return out, omitted
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
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

// mergeSizes tells a merge pass what a merge changes: the rendered size of the
// parent's line and of its two children's lines together. The parent is
// built when asked.
type mergeSizes func(parent Node) (parentSize, childrenSize int64, err error)

// builtSet answers which nodes are built; a merge pass asks it for the first
// built parent of a stretch of siblings.
type builtSet interface {
	// firstBuilt is the smallest j in [from, to] with (l, j) built.
	firstBuilt(l int, from, to int64) (int64, bool)
}

// mergePass runs the sawtooth's merge pass. A closed pass opens when the
// size passes high (or, with force, when it passes low: the compaction view
// follows every chat-view merge). An open pass replaces the most due
// mergeable pair with its parent until the size is at most low; when no
// pair is mergeable it stays open and resumes at the next change. A pair is
// mergeable when it is two adjacent siblings at one level, the first of
// even index, and their parent is built. Most due is the highest
// (t - last) / 2^l, where last is the pair's last entry and l the
// children's level; ties go to the oldest. It returns the number of merges
// made.
//
// It works on runs, never expanding the partition: runs are maximal, so
// sibling pairs lie inside one run, and within a run the oldest mergeable
// pair is also its most due. A step costs O(runs).
func (p *partition) mergePass(t, high, low int64, force bool, built builtSet, sizes mergeSizes) (int, error) {
	if !p.Open && (p.Size > high || (force && p.Size > low)) {
		p.Open = true
	}
	if !p.Open {
		return 0, nil
	}
	merged := 0
	for p.Size > low {
		best, bestJ, found := -1, int64(0), false
		var bestDue due
		for k, r := range p.Runs {
			j, ok := firstPair(r, built)
			if !ok {
				continue
			}
			last := (2*j+2)<<r.L - 1
			d := newDue(t-last, r.L)
			if !found || d.more(bestDue) {
				best, bestJ, bestDue, found = k, j, d, true
			}
		}
		if !found {
			break
		}
		parent := Node{L: p.Runs[best].L + 1, I: bestJ}
		ps, cs, err := sizes(parent)
		if err != nil {
			return merged, err
		}
		p.mergeAt(best, bestJ)
		p.Size += ps - cs
		p.Merges++
		merged++
	}
	if p.Size <= low {
		p.Open = false
	}
	return merged, nil
}

// firstPair is the parent index of the oldest mergeable pair in r.
func firstPair(r run, built builtSet) (int64, bool) {
	from := (r.I + 1) / 2 // the first even index in r, halved
	to := (r.I+r.N)/2 - 1 // the last pair that fits in r
	if from > to {
		return 0, false
	}
	return built.firstBuilt(r.L+1, from, to)
}

// mergeAt replaces the pair (L, 2j), (L, 2j+1) of run k with its parent,
// keeping the runs maximal.
func (p *partition) mergeAt(k int, j int64) {
	r := p.Runs[k]
	var repl []run
	if left := 2*j - r.I; left > 0 {
		repl = append(repl, run{L: r.L, I: r.I, N: left})
	}
	repl = append(repl, run{L: r.L + 1, I: j, N: 1})
	if right := r.I + r.N - (2*j + 2); right > 0 {
		repl = append(repl, run{L: r.L, I: 2*j + 2, N: right})
	}
	runs := make([]run, 0, len(p.Runs)+2)
	runs = append(runs, p.Runs[:k]...)
	for _, x := range repl {
		if n := len(runs) - 1; n >= 0 && runs[n].L == x.L && runs[n].I+runs[n].N == x.I {
			runs[n].N += x.N
			continue
		}
		runs = append(runs, x)
	}
	for _, x := range p.Runs[k+1:] {
		if n := len(runs) - 1; n >= 0 && runs[n].L == x.L && runs[n].I+runs[n].N == x.I {
			runs[n].N += x.N
			continue
		}
		runs = append(runs, x)
	}
	p.Runs = runs
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

// mul128 is x * 2^shift as a 128-bit number (high, low).
func mul128(x uint64, shift int) (uint64, uint64) {
	if shift >= 64 {
		return x << (shift - 64), 0
	}
	return bits.Mul64(x, 1<<uint(shift))
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
