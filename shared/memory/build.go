package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/textcut"
	"github.com/durachat/durachat/shared/transcript"
)

// RetryError asks the transport to deliver the message again after After:
// the build failed (and is recorded as retrying) or is not due yet.
type RetryError struct {
	After time.Duration
	Err   error
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("retry in %s: %v", e.After, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// RetryDelay is tasks.RetryDelay: the message comes back after After.
func (e *RetryError) RetryDelay() time.Duration { return e.After }

// errNotDue: the node waits out its retry delay.
var errNotDue = errors.New("node is waiting out its retry delay")

// maxLineBytes guards the table against a compactor that returns far more
// than a line; such a line is cut in the middle.
const maxLineBytes = 8 << 10

// startOutcome is what the start transition decided.
type startOutcome int

const (
	skipBuild  startOutcome = iota // built, in flight elsewhere, or not startable now
	startBuild                     // this builder owns the claim
	notDue                         // waiting out a retry delay
)

// ErrNoCompactor: this Memory was made without a Compactor and builds nothing.
var ErrNoCompactor = errors.New("memory: no compactor: this program does not build nodes")

// Build builds node (l, i) of the chat's current incarnation; see build.
func (m *Memory) Build(ctx context.Context, tenant, chat string, l int, i int64) error {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return &RetryError{After: m.retry, Err: err}
	}
	return m.build(ctx, c, l, i)
}

// build builds node (l, i) of the incarnation c: the work of one queue
// message. A built node, a build in flight elsewhere, or a node that may
// not start yet is left alone (nil). A failed build is recorded in the
// chat's state and answered with a *RetryError asking for the message
// again after the retry delay; the scheduler re-finds the node even if
// that never comes.
func (m *Memory) build(ctx context.Context, c chatid.Chat, l int, i int64) error {
	if l < 0 || l > 62 || i < 0 {
		return fmt.Errorf("%w: node (%d, %d)", tasks.ErrMalformed, l, i)
	}
	if m.compactor == nil {
		return ErrNoCompactor
	}
	b := &nodeBuild{m: m, ch: c, n: Node{L: l, I: i}, owner: newID(), started: m.now()}
	var p startPlan
	_, err := m.states.update(ctx, c, func(st *chatState) error { return b.start(st, &p) })
	if errors.Is(err, errRetired) {
		// The chat was deleted (the state of its incarnation went with
		// it): nothing to build.
		m.logger.InfoContext(ctx, "memory: dropping a build of a deleted chat", "chat", c.ID, "node", b.n.Label())
		return nil
	}
	if err != nil {
		return &RetryError{After: m.retry, Err: err}
	}
	if len(p.sends) > 0 {
		m.changes.signal(c)
		if err := m.send(ctx, c, p.sends); err != nil {
			m.logger.WarnContext(ctx, "memory: queueing builds", "chat", c.ID, "err", err)
		}
	}
	switch p.outcome {
	case notDue:
		return &RetryError{After: max(time.Duration(p.dueAt-m.now().UnixMilli())*time.Millisecond, time.Second), Err: errNotDue}
	case skipBuild:
		if p.held {
			return b.recordWritten(ctx)
		}
		return nil
	}
	if len(b.group) > 1 {
		return b.buildGroup(ctx)
	}
	return b.run(ctx)
}

// startPlan is what the start transition decided for a build, and the
// other builds it found due on the way.
type startPlan struct {
	outcome startOutcome
	dueAt   int64  // when a node waiting out its retry delay is due (Unix ms)
	sends   []Node // other nodes due now, to queue
	held    bool   // another build holds a live claim on the node
}

// start is the start transition over the chat's state, for
// states.update: it claims b's node when the node may start (taking the
// claim a scheduler left for it, or scheduling the chat and finding it
// among the due), notes the retries it has had, gathers a group build
// around it, and keeps the state as the build's snapshot.
func (b *nodeBuild) start(st *chatState, p *startPlan) error {
	*p = startPlan{}
	b.snapshot, b.group = nil, nil
	m, n := b.m, b.n
	now := m.now()
	if !n.Complete(st.T) || st.built(n) {
		return errNoChange
	}
	if k, ok := st.claimOf(n); ok && st.Claims[k].Until > now.UnixMilli() {
		if st.Claims[k].Owner != "" {
			p.held = true
			return errNoChange // a live build has it: this is a duplicate
		}
		st.Claims[k].Owner = b.owner
		st.Claims[k].Until = now.Add(m.claimLease).UnixMilli()
		p.outcome = startBuild
	} else if err := b.startScheduled(st, now, p); err != nil {
		return err
	}
	if r, ok := st.retryOf(n); ok {
		b.refusals, b.failures = st.Retries[r].Refusals, st.Retries[r].Failures
	}
	if _, ok := m.compactor.(GroupCompactor); ok && p.outcome == startBuild && b.failures == 0 {
		b.group = st.groupWith(n, b.owner, now, m.claimLease)
		p.sends = slices.DeleteFunc(p.sends, func(s Node) bool { return slices.Contains(b.group, s) })
	}
	// The state as this build starts: its compaction view is the
	// context, should the compactor be called.
	b.snapshot = st
	return nil
}

// startScheduled schedules the chat's due builds and claims b's node
// when it is among them; a node that is not says when it is due, if it
// waits out a retry delay.
func (b *nodeBuild) startScheduled(st *chatState, now time.Time, p *startPlan) error {
	n := b.n
	var dropped int
	p.sends, dropped = st.schedule(now, b.m.claimLease)
	for k, s := range p.sends {
		if s == n {
			p.sends = append(p.sends[:k], p.sends[k+1:]...)
			c, _ := st.claimOf(n)
			st.Claims[c].Owner = b.owner
			p.outcome = startBuild
			return nil
		}
	}
	if r, ok := st.retryOf(n); ok && st.Retries[r].At > now.UnixMilli() {
		p.outcome, p.dueAt = notDue, st.Retries[r].At
	}
	if len(p.sends) == 0 && dropped == 0 {
		return errNoChange
	}
	return nil
}

// run builds b's node under its claim and records the outcome: a line
// and its row, or a failure to retry.
func (b *nodeBuild) run(ctx context.Context) error {
	// A build never outlives its claim: it stops a little before the lease
	// runs out and another builder may take the node.
	bctx, cancel := context.WithTimeout(ctx, b.m.claimLease*9/10)
	defer cancel()
	res, row, buildErr := b.produce(bctx)
	// The outcome is recorded even when ctx ended meanwhile (a worker
	// stopping, a function near its deadline): a recorded failure comes
	// back in 10 s and a recorded line is not built again, where an
	// unrecorded claim would wait out its whole lease.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer rcancel()
	if errors.Is(buildErr, errRetired) {
		return nil // deleted under the build: nothing to record, nothing to retry
	}
	if buildErr != nil {
		return b.fail(rctx, res, buildErr)
	}
	return b.finish(rctx, res, row)
}

// recordWritten records n when a build that holds its claim wrote its row
// but could not record it (a throttled or failed state write): that
// build's message comes back, finds the claim still held, and would
// otherwise leave the node unbuilt until the lease ran out. A row is the
// node's final line, so any build may record it; a build that is still
// running records nothing twice (finish marks a node built once), and the
// row's model call is counted by whichever records it. With no row yet, the holder is still at work (or died, and the lease frees the
// node): nothing to do.
func (b *nodeBuild) recordWritten(ctx context.Context) error {
	row, err := b.m.readRow(ctx, b.ch, b.n)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return &RetryError{After: b.m.retry, Err: fmt.Errorf("reading node %s: %w", b.n.Label(), err)}
	}
	return b.finish(ctx, produced{}, row)
}

// nodeBuild is one build of one node: what its steps share.
type nodeBuild struct {
	m  *Memory
	ch chatid.Chat
	n  Node
	// owner marks the claim this build holds.
	owner   string
	started time.Time
	// snapshot is the chat's state as the build started.
	snapshot *chatState
	// refusals and failures are the node's counts before this build.
	refusals int
	failures int
	// group are the nodes this build writes with n in one call (n among
	// them), when there are several; see groupWith.
	group []Node
}

// recordTimeout bounds writing a build's outcome to the state after the
// build's own context has ended.
const recordTimeout = 5 * time.Second

// countsAsRefusal reports whether a failed build counts toward
// RefusalLimit: the model turned this node's content down (a refusal, an
// invalid request, an image rejected also by name). Retryable errors and
// store or read errors never count, and neither do errors about the
// account rather than the node (a bad key, no permission, an unknown
// model, no credit or quota): they would give every node of every chat a
// mechanical line; they are retried every 10 s until fixed.
func countsAsRefusal(err error) bool {
	if model.IsRefused(err) {
		return true
	}
	if model.IsRetryable(err) {
		return false
	}
	var me *model.Error
	if errors.As(err, &me) {
		switch me.Status {
		case 401, 402, 403, 404, 429:
			return false
		}
	}
	return true
}

// produced is what a build learned, for the state and the logs.
type produced struct {
	attempts int
	model    string
	images   leafImages
	hasImage bool
	source   int
	called   bool
	created  bool // this build wrote the row
}

// produce loads the node's source, writes its line (verbatim, by the
// compactor, or mechanical after repeated refusals) and creates its row.
// When the row exists already, that row is the answer: nothing is built
// twice.
func (b *nodeBuild) produce(ctx context.Context) (produced, nodeRow, error) {
	if row, err := b.existingRow(ctx, b.n); err == nil {
		return produced{}, row, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return produced{}, nodeRow{}, fmt.Errorf("reading node %s: %w", b.n.Label(), err)
	}
	src, err := b.load(ctx, nil)
	if err != nil {
		return src.res, nodeRow{}, err
	}
	return b.compactAlone(ctx, src)
}

// gen is the erasure generation of the state the build started from.
func (b *nodeBuild) gen() int64 {
	if b.snapshot == nil {
		return 0
	}
	return b.snapshot.Gen
}

// existingRow reads the row of n (a node of b's build), the answer when
// another build wrote it first; a row an erasure took back (built before
// it, from words since erased) is deleted and reads as none.
func (b *nodeBuild) existingRow(ctx context.Context, n Node) (nodeRow, error) {
	row, version, err := b.m.readRowVersion(ctx, b.ch, n)
	if err != nil || b.snapshot == nil || !b.snapshot.staleRow(n, row.Gen) {
		return row, err
	}
	if err := b.m.dropRow(ctx, b.ch, n, version); err != nil {
		return nodeRow{}, err
	}
	return nodeRow{}, fmt.Errorf("node %s: its line was erased: %w", n.Label(), store.ErrNotFound)
}

// loaded is a node's source as its build loaded it.
type loaded struct {
	c     CompactRequest
	res   produced
	names []string  // the images loaded, by name
	lines [2]string // a merge's child lines
	child [2]int    // and their lengths
}

// load reads the node's source: a leaf's entry, the images it names and
// whether they are described; a merge's two child lines, from known when
// it has them (lines a group wrote) or else from their rows.
func (b *nodeBuild) load(ctx context.Context, known map[Node]string) (loaded, error) {
	m, ch, n := b.m, b.ch, b.n
	src := loaded{c: CompactRequest{Level: n.L, Index: n.I, Label: n.Label(), Images: []model.Image{}}}
	c, res := &src.c, &src.res
	if n.L == 0 {
		entries, err := m.transcript.Entries(ctx, ch, n.I, n.I+1)
		if err != nil {
			return src, fmt.Errorf("reading entry %d: %w", n.I, err)
		}
		if len(entries) != 1 || entries[0].I != n.I {
			return src, fmt.Errorf("reading entry %d: the log returned %d entries", n.I, len(entries))
		}
		e := entries[0]
		c.Kind = e.Kind
		c.Source = compactorSource(LeafSource(e.Kind, e.Text))
		imgs, li, err := b.leafImages(ctx, e, c.Source)
		if err != nil {
			return src, err
		}
		c.Images, res.images, res.hasImage = imgs, li, li.Named > 0
		for _, img := range imgs {
			src.names = append(src.names, img.Name)
		}
		if c.Describe, err = b.undescribed(ctx, src.names); err != nil {
			return src, err
		}
	} else {
		a, bn := n.Children()
		lines := [2]string{}
		var want []Node
		for k, child := range []Node{a, bn} {
			if l, ok := known[child]; ok {
				lines[k] = l
			} else {
				want = append(want, child)
			}
		}
		rows, err := m.rows(ctx, ch, b.gen(), want)
		if err != nil {
			return src, err
		}
		for k, child := range []Node{a, bn} {
			if _, ok := known[child]; ok {
				continue
			}
			r, ok := rows[child]
			if !ok {
				return src, fmt.Errorf("merge %s: a child is not built yet", n.Label())
			}
			lines[k] = r.line
		}
		c.Source = MergeSource(lines[0], lines[1])
		src.lines, src.child = lines, [2]int{len(lines[0]), len(lines[1])}
	}
	res.source = len(c.Source)
	return src, nil
}

// compactAlone writes the line of a loaded source with a call of its own
// (none when it is kept word for word) and creates the row.
func (b *nodeBuild) compactAlone(ctx context.Context, src loaded) (produced, nodeRow, error) {
	m, n, c, res := b.m, b.n, src.c, src.res
	var out Compacted
	if len(c.Images) == 0 && len(c.Source) <= LineBytes {
		out = Compacted{Line: c.Source, Verbatim: true}
	} else {
		ctxLines, err := b.contextBlock(ctx, contextEnd(n))
		if err != nil {
			return res, nodeRow{}, err
		}
		c.Context = ctxLines
		res.called = true
		out, err = m.compactor.Compact(ctx, c)
		if err != nil {
			res.attempts, res.model = out.Attempts, out.Model
			res.images.Attached, res.images.Skipped, res.images.NamesOnly = out.Attached, out.Skipped+res.images.Capped, out.NamesOnly
			if !countsAsRefusal(err) || b.refusals+1 < RefusalLimit {
				return res, nodeRow{}, err
			}
			// The model turned this node down RefusalLimit times: keep a
			// marked cut of the source rather than asking forever. A
			// source that fits a line (a short message with images) needs
			// no cut: it keeps its words, as it would without images.
			m.logger.WarnContext(ctx, "memory: mechanical line after repeated refusals", "chat", b.ch.ID, "node", n.Label(), "err", err)
			if len(c.Source) <= LineBytes {
				out = Compacted{Line: c.Source, Verbatim: true, Mechanical: true, Attempts: out.Attempts, Model: out.Model}
			} else {
				out = Compacted{Line: mechanicalLine(c.Source), Mechanical: true, Attempts: out.Attempts, Model: out.Model}
			}
		}
		if strings.TrimSpace(out.Line) == "" {
			return res, nodeRow{}, &model.Error{Retryable: true, Err: fmt.Errorf("compactor returned an empty line for %s", n.Label())}
		}
		if out.Verbatim {
			out.Line = c.Source
		}
	}
	src.res = res
	return b.store(ctx, src, out)
}

// store stores the descriptions the line's call wrote and creates the
// node's row with the line; when another builder created it first, that
// row stands.
func (b *nodeBuild) store(ctx context.Context, src loaded, out Compacted) (produced, nodeRow, error) {
	m, ch, n, c, res := b.m, b.ch, b.n, src.c, src.res
	if err := b.describe(ctx, c, out, &res.images); err != nil {
		return res, nodeRow{}, err
	}
	line := out.Line
	if len(line) > maxLineBytes {
		line = cutMiddle(line, maxLineBytes, " [...] ")
	}
	res.attempts, res.model = out.Attempts, out.Model
	out.Skipped += res.images.Capped
	res.images.Attached, res.images.Skipped, res.images.NamesOnly = out.Attached, out.Skipped, out.NamesOnly
	row := nodeRow{
		Text: line, Child: src.child, Verbatim: out.Verbatim, Mechanical: out.Mechanical,
		Attempts: out.Attempts, Model: out.Model, SourceBytes: len(c.Source), Images: src.names,
		Attached: out.Attached, Skipped: out.Skipped, NamesOnly: out.NamesOnly, BuiltAt: m.now().UnixMilli(),
		Named: res.images.Named, Missing: res.images.Missing, Resent: res.images.Resent, Described: res.images.Described,
		DescribeFailed: res.images.DescribeFailed, Undescribed: res.images.Undescribed,
		Called: res.called, Gen: b.gen(),
	}
	body, err := json.Marshal(row)
	if err != nil {
		return res, nodeRow{}, fmt.Errorf("encoding node %s: %w", n.Label(), err)
	}
	// The row is written only while the build's incarnation is current:
	// a chat deleted under its build keeps no node of it.
	if current, err := m.ids.IsCurrent(ctx, ch); err != nil {
		return res, nodeRow{}, fmt.Errorf("writing node %s: %w", n.Label(), err)
	} else if !current {
		return res, nodeRow{}, errRetired
	}
	err = m.table.Create(ctx, store.Item{Key: nodeKey(ch, n), Body: body})
	switch {
	case err == nil:
		res.created = true
		return res, row, nil
	case errors.Is(err, store.ErrConditionFailed):
		// Another builder won the race; its row stands.
		existing, rerr := m.readRow(ctx, ch, n)
		if rerr != nil {
			return res, nodeRow{}, fmt.Errorf("reading node %s after a lost race: %w", n.Label(), rerr)
		}
		return res, existing, nil
	default:
		return res, nodeRow{}, fmt.Errorf("writing node %s: %w", n.Label(), err)
	}
}

// leafImages loads the stored images the source of entry e's leaf names,
// in first-named order. A never-stored (or deleted) image is skipped; any
// other read error fails the build, so an outage delays a leaf and never
// drops its image. A logged zoom result sends no image its original's leaf
// already saw; when that original is unknown it sends none.
func (b *nodeBuild) leafImages(ctx context.Context, e transcript.Entry, source string) ([]model.Image, leafImages, error) {
	m, tenant := b.m, b.ch.Tenant
	id, of := e.I, e.Of
	li := leafImages{I: id}
	names := refs.Names(source)
	li.Named = len(names)
	imgs := []model.Image{}
	if len(names) == 0 {
		return imgs, li, nil
	}
	if e.Tool == "zoom" {
		seen := map[string]bool{}
		if of >= 0 && of < id {
			orig, err := m.transcript.Entries(ctx, b.ch, of, of+1)
			if err != nil {
				return nil, li, fmt.Errorf("reading entry %d, which entry %d zoomed: %w", of, id, err)
			}
			for _, e := range orig {
				for _, name := range refs.Names(compactorSource(LeafSource(e.Kind, e.Text))) {
					seen[name] = true
				}
			}
		}
		kept := names[:0:0]
		for _, name := range names {
			if of >= 0 && of < id && !seen[name] {
				kept = append(kept, name)
			} else {
				li.Resent++
			}
		}
		names = kept
	}
	loaded := 0
	for i, name := range names {
		if len(imgs) == MaxLeafImages || loaded >= LeafImageBytes {
			li.Capped = len(names) - i
			break
		}
		img, err := m.images.Get(ctx, tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			li.Missing++
			continue
		}
		if err != nil {
			return nil, li, fmt.Errorf("reading image %s for entry %d: %w", name, id, err)
		}
		img.Name = name
		imgs = append(imgs, img)
		loaded += len(img.Data)
	}
	return imgs, li, nil
}

// A leaf loads at most MaxLeafImages of the stored images its message
// names, and none once those loaded hold LeafImageBytes: no provider takes
// more in one request (Anthropic: 100 images, 32 MB a request), and a
// message naming thousands of stored images must not take the compact
// function's memory (its builds run ten at a time). The rest count as
// skipped.
const (
	MaxLeafImages  = 100
	LeafImageBytes = 24 << 20
)

// undescribed lists the images of names that have no description yet, for
// the compactor to describe. A failed read fails the build, like a failed
// image read: the leaf is retried, and its images described then.
func (b *nodeBuild) undescribed(ctx context.Context, names []string) ([]string, error) {
	if b.m.descs == nil {
		return nil, nil
	}
	var out []string
	for _, name := range names {
		_, err := b.m.descs.Description(ctx, b.ch.Tenant, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			out = append(out, name)
		case err != nil:
			return nil, fmt.Errorf("reading the description of image %s: %w", name, err)
		}
	}
	return out, nil
}

// describe stores the descriptions the compactor wrote for c.Describe and
// counts the leaf's stored images by description. It runs before the
// leaf's row is written: a failed write fails the build, which is retried
// like any leaf (and asks for the descriptions again), so no description
// the model wrote is dropped with its leaf built.
func (b *nodeBuild) describe(ctx context.Context, c CompactRequest, out Compacted, li *leafImages) error {
	if b.m.descs == nil {
		li.Undescribed = len(c.Images)
		return nil
	}
	stored := 0
	for _, name := range c.Describe {
		d, ok := out.Descriptions[name]
		if !ok {
			continue
		}
		if err := b.m.descs.PutDescription(ctx, b.ch.Tenant, name, d); err != nil {
			return fmt.Errorf("storing the description of image %s: %w", name, err)
		}
		stored++
	}
	li.Described = len(c.Images) - len(c.Describe) + stored
	li.DescribeFailed = max(0, out.DescribeAsked-stored)
	li.Undescribed = len(c.Images) - li.Described - li.DescribeFailed
	return nil
}

// Bounds on one build's context. The compaction view keeps itself near
// CompactHigh bytes, but while a burst of new entries is built (leaves go
// before merges) it can outgrow that: then only the newest lines are sent.
const (
	contextMaxLines = 4096
	contextMaxBytes = 2 * CompactHigh
)

// contextBlock renders the compaction-view lines that end at or before end
// (a node's contextEnd, or a group's latest) as the "<chat>" block
// every compactor call reads as its cacheable prefix. Lines unbuilt when
// the build started show as the placeholder, so parallel builds see the
// same bytes.
func (b *nodeBuild) contextBlock(ctx context.Context, end int64) (string, error) {
	st := b.snapshot
	nodes, omitted := st.Compact.lastBefore(end, contextMaxLines)
	// Read from the newest line back, in chunks, until the byte bound.
	rows := make(map[Node]nodeInfo, len(nodes))
	line := func(c Node) (string, bool) {
		if !st.built(c) {
			return "", false
		}
		r, ok := rows[c]
		return r.line, ok
	}
	size, keep := int64(0), len(nodes)
	const chunk = 128
scan:
	for hi := len(nodes); hi > 0; hi -= chunk {
		lo := max(0, hi-chunk)
		var want []Node
		for _, c := range nodes[lo:hi] {
			if st.built(c) {
				want = append(want, c)
			}
		}
		got, err := b.m.rows(ctx, b.ch, st.Gen, want)
		if err != nil {
			return "", fmt.Errorf("reading the compaction view: %w", err)
		}
		for c, r := range got {
			rows[c] = r
		}
		for k := hi - 1; k >= lo; k-- {
			l, ok := line(nodes[k])
			if !ok {
				l = Placeholder
			}
			size += lineSize(nodes[k], len(l))
			if size > contextMaxBytes {
				break scan
			}
			keep = k
		}
	}
	omitted += int64(keep)
	block := renderLines(nodes[keep:], line)
	if omitted > 0 {
		block = strings.Replace(block, "<chat>\n", fmt.Sprintf("<chat>\n(%d older lines left out while new entries are summarized)\n", omitted), 1)
	}
	return block, nil
}

// renderLines renders "<chat>\n", one "<label>|<line>\n" per node, and
// "</chat>"; line reports false for a node shown as the placeholder.
func renderLines(nodes []Node, line func(Node) (string, bool)) string {
	var b strings.Builder
	b.WriteString("<chat>\n")
	for _, n := range nodes {
		b.WriteString(n.Label())
		b.WriteByte('|')
		if l, ok := line(n); ok {
			b.WriteString(l)
		} else {
			b.WriteString(Placeholder)
		}
		b.WriteByte('\n')
	}
	b.WriteString("</chat>")
	return b.String()
}

// finish records a built node: it marks it built, updates both views
// (a leaf's placeholder becomes its line), runs the sawtooths and sends
// what may start next.
func (b *nodeBuild) finish(ctx context.Context, res produced, row nodeRow) error {
	m, ch, n := b.m, b.ch, b.n
	chat := ch.ID
	line := Line(row.Text)
	m.lines.put(cacheKey(ch, row.Gen), n, nodeInfo{line: line, child: row.Child, verbatim: row.Verbatim, mechanical: row.Mechanical, images: row.Images})
	// The row's model call is counted when the row is first recorded, by
	// whichever delivery does it: the build that wrote it, or a duplicate
	// or a build past a lapsed lease that found it written. A build that
	// called the model and then lost the race to write the row made a
	// call of its own, counted too.
	called := res.called || row.Called
	lostRace := res.called && !res.created
	res.imagesOf(n, row)
	var sends []Node
	first, staleGen := false, int64(0)
	_, err := m.states.update(ctx, ch, func(st *chatState) error {
		sends, first, staleGen = nil, false, 0
		if !n.Complete(st.T) {
			// The chat was deleted under this build: it records nothing.
			return errNoChange
		}
		if staleGen, sends = b.takenBack(st, row); staleGen > 0 {
			return nil
		}
		st.dropRetry(n)
		if st.markBuilt(n) {
			first = true
			st.countBuilt(n, len(line), row, res, called)
		}
		if lostRace {
			st.ModelCalls++
		}
		st.dropClaim(n)
		m.mergePasses(ctx, chat, st, m.mergeSizes(ctx, ch, st.Gen))
		sends, _ = st.schedule(m.now(), m.claimLease)
		return nil
	})
	if errors.Is(err, errRetired) {
		return nil // deleted under this build: it records nothing
	}
	if err != nil {
		// The row is written; the next pump or delivery records it.
		return &RetryError{After: m.retry, Err: fmt.Errorf("recording node %s: %w", n.Label(), err)}
	}
	m.changes.signal(ch)
	if staleGen > 0 {
		if err := m.dropStaleRow(ctx, ch, n, staleGen); err != nil {
			return &RetryError{After: m.retry, Err: err}
		}
	}
	if first {
		b.record(ctx, "built", res, row, nil)
	}
	if err := m.send(ctx, ch, sends); err != nil {
		m.logger.WarnContext(ctx, "memory: queueing builds", "chat", chat, "err", err)
	}
	return nil
}

// imagesOf takes a leaf's image counts from its row when another build
// wrote it (a group call's, or one this delivery duplicates); a row
// written before it kept them all names only its images.
func (res *produced) imagesOf(n Node, row nodeRow) {
	if n.L == 0 && !res.hasImage && (row.Named > 0 || len(row.Images) > 0) {
		res.images = leafImages{I: n.I, Named: max(row.Named, len(row.Images)), Attached: row.Attached, Skipped: row.Skipped, NamesOnly: row.NamesOnly,
			Missing: row.Missing, Resent: row.Resent, Described: row.Described, DescribeFailed: row.DescribeFailed, Undescribed: row.Undescribed}
		res.hasImage = true
	}
}

// takenBack is finish's step for a row built from words an erasure took
// back while it ran (0 when the row is not such): it is not the node's
// line; the node's claim goes and it is scheduled again, to be built from
// its sources as they are now. It returns the erasure's generation and the
// nodes to send.
func (b *nodeBuild) takenBack(st *chatState, row nodeRow) (int64, []Node) {
	if !st.staleRow(b.n, row.Gen) {
		return 0, nil
	}
	k, _ := st.staleOf(b.n)
	st.dropClaim(b.n)
	sends, _ := st.schedule(b.m.now(), b.m.claimLease)
	return st.Stale[k].G, sends
}

// countBuilt adds a node built for the first time to the chat's counts:
// a leaf's line replaces its placeholder in both views' sizes, and the
// node counts as mechanical, verbatim or a model call, and for its images.
func (st *chatState) countBuilt(n Node, lineLen int, row nodeRow, res produced, called bool) {
	if n.L == 0 {
		delta := lineSize(n, lineLen) - placeholderSize(n)
		st.View.Size += delta
		st.Compact.Size += delta
	}
	switch {
	case row.Mechanical:
		st.MechanicalCount++
		st.Mechanical = append(st.Mechanical, n)
		if len(st.Mechanical) > keepMechanical {
			st.Mechanical = st.Mechanical[len(st.Mechanical)-keepMechanical:]
		}
	case row.Verbatim && !called:
		st.Verbatim++
	}
	if called {
		st.ModelCalls++
	}
	if n.L == 0 && res.hasImage {
		st.countImageLeaf(res.images)
	}
}

// countImageLeaf adds a leaf that names images to the chat's image
// counts, keeping the latest keepImageLeaves of them.
func (st *chatState) countImageLeaf(li leafImages) {
	st.ImageLeaves = append(st.ImageLeaves, li)
	if len(st.ImageLeaves) > keepImageLeaves {
		st.ImageLeaves = st.ImageLeaves[len(st.ImageLeaves)-keepImageLeaves:]
	}
	st.ImageTotals.Leaves++
	st.ImageTotals.Attached += int64(li.Attached)
	st.ImageTotals.Skipped += int64(li.Skipped)
	st.ImageTotals.Missing += int64(li.Missing)
	if li.NamesOnly {
		st.ImageTotals.NamesOnly++
	}
	st.ImageTotals.Described += int64(li.Described)
	st.ImageTotals.DescribeFailed += int64(li.DescribeFailed)
	st.ImageTotals.Undescribed += int64(li.Undescribed)
}

// fail records a failed build: the node waits the retry delay (forever for
// store, read, retryable and account errors; a refusal of the node counts
// toward RefusalLimit), and the transport is asked to deliver again then.
func (b *nodeBuild) fail(ctx context.Context, res produced, cause error) error {
	m, ch, n := b.m, b.ch, b.n
	chat := ch.ID
	refused := countsAsRefusal(cause)
	now := m.now()
	msg, outcome := fmt.Sprintf("node %s: %v", n.Label(), cause), "failed"
	if deniedError(cause) {
		msg, outcome = fmt.Sprintf("denied (a setting of the account, not node %s; retried every %s until fixed): %v", n.Label(), m.retry, cause), "denied"
	}
	var sends []Node
	_, err := m.states.update(ctx, ch, func(st *chatState) error {
		sends = nil
		if st.built(n) {
			return errNoChange
		}
		if k, ok := st.claimOf(n); ok && st.Claims[k].Owner == b.owner {
			st.Claims = append(st.Claims[:k], st.Claims[k+1:]...)
		}
		k, ok := st.retryOf(n)
		if !ok {
			st.Retries = append(st.Retries, retryEntry{L: n.L, I: n.I})
			k = len(st.Retries) - 1
		}
		r := &st.Retries[k]
		r.Failures++
		if refused {
			r.Refusals++
		}
		r.At = now.Add(m.retry).UnixMilli()
		r.Err = textcut.Head(msg, 300)
		st.Failed++
		st.setError(now, textcut.Head(msg, 500))
		sends, _ = st.schedule(now, m.claimLease)
		return nil
	})
	if errors.Is(err, errRetired) {
		return nil // deleted under this build: nothing to retry
	}
	if err != nil {
		m.logger.WarnContext(ctx, "memory: recording a failed build", "chat", chat, "node", n.Label(), "err", err)
	} else {
		m.changes.signal(ch)
		if err := m.send(ctx, ch, sends); err != nil {
			m.logger.WarnContext(ctx, "memory: queueing builds", "chat", chat, "err", err)
		}
	}
	b.record(ctx, outcome, res, nodeRow{}, cause)
	if b.failures == 0 {
		// The first failure of a node is logged once, loudly; the status
		// keeps the last error and the retry count after that.
		m.logger.WarnContext(ctx, "memory: build failed; retrying every "+m.retry.String(), "chat", chat, "node", n.Label(), "err", cause)
	}
	return &RetryError{After: m.retry, Err: cause}
}

// contextEnd is where a node's compactor context ends: the compaction-view
// lines before a leaf's entry, or up to a merge's last entry.
func contextEnd(n Node) int64 {
	if n.L > 0 {
		return n.End()
	}
	return n.Start()
}
