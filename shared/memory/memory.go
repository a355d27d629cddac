package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// Transcript is the chat transcript memory reads: its only source of truth.
type Transcript interface {
	// Len is the number of entries logged in the incarnation c.
	Len(ctx context.Context, c chatid.Chat) (int64, error)
	// Entries returns c's entries [from, to), in order.
	Entries(ctx context.Context, c chatid.Chat, from, to int64) ([]transcript.Entry, error)
}

// Images reads a tenant's stored images: store.ErrNotFound when the name
// was never stored, store.ErrUnavailable (wrapped) on an outage.
type Images interface {
	Get(ctx context.Context, tenant, name string) (model.Image, error)
}

// Descriptions keeps one short description per image of a tenant, beside
// the image (images.Store).
type Descriptions interface {
	// Description returns an image's description, or store.ErrNotFound
	// while it has none.
	Description(ctx context.Context, tenant, name string) (string, error)
	// PutDescription stores it; an image described already keeps its first.
	PutDescription(ctx context.Context, tenant, name, text string) error
}

// Config wires a Memory. Table, Transcript and Queue are required. A Memory
// without a Compactor serves and schedules but builds nothing: the memory
// API function, whose builds run in the compact function.
type Config struct {
	Table      store.Table
	Transcript Transcript
	// Images are read for leaves that name them and for zoom pages; nil
	// means no image is ever stored.
	Images Images
	// Descriptions, when set, are asked of the compactor for the images a
	// leaf shows it that have none, and stored; zoom shows them.
	Descriptions Descriptions
	// Queue carries build messages (tasks.Build), which BuildTask runs.
	Queue     store.Queue
	Compactor Compactor
	// Now is the clock (time.Now when nil); tests inject their own.
	Now func() time.Time
	// Search turns the search tool on for every chat; a chat can also opt
	// in on its own (PUT .../memory/settings).
	Search bool
	// Embedder, when set, embeds each searchable entry once it is logged,
	// and search ranks by meaning too, fused with the ranking by words;
	// without it search is by words alone.
	Embedder Embedder
	// ClaimLease is how long a build's claim lasts: a claimed build may take
	// this long before another builder may take it over (default 3
	// minutes). A build is cancelled at its lease so it never outlives its
	// claim.
	ClaimLease time.Duration
	// Retry is the fixed delay before a failed build is tried again
	// (default 10 s).
	Retry time.Duration
	// Wait bounds GET .../view?wait=turn (default 20 s; keep it under the
	// HTTP API's 30 s ceiling).
	Wait time.Duration
	// CacheLines bounds the in-process cache of node lines (default
	// 20,000; negative turns it off). Nodes never change and the cache is
	// keyed by the chat's incarnation, so it is never stale.
	CacheLines int
	// Logger receives one structured record per build (slog.Default when
	// nil).
	Logger *slog.Logger
	// Metrics, when set, receives a CloudWatch Embedded Metric Format
	// line per failed build (Lambda: os.Stdout).
	Metrics io.Writer
	// MetricsFunction is the metrics' FunctionName dimension (Lambda:
	// the function's name); empty writes them without a dimension.
	MetricsFunction string
	// Chats, when set, admit a write of the chat's settings the way an
	// append is admitted (refused while the chat is being deleted) and tell
	// status how far a chat's deletion came; without them memory opens
	// the incarnation itself and shows no deletion.
	Chats Chats
	// Forget, when set, is the erasure the forget tool runs; without it
	// the tool is off for every chat.
	Forget Forgetter
}

// Chats is what memory needs of the chat lifecycle (lifecycle.Chats).
type Chats interface {
	// Opening opens a chat's incarnation for a write that may come before
	// the chat's first append (its settings), so what it writes belongs to
	// the incarnation that append then logs into.
	Opening(ctx context.Context, tenant, chat string) (chatid.Chat, error)
	// Deletion tells whether a chat is being deleted, and how far it came
	// (nil when it is not).
	Deletion(ctx context.Context, tenant, chat string) (*wire.StatusDeletion, error)
}

// Memory builds and serves the summary trees of all chats. It holds no
// chat in memory between calls: everything lives in the table.
type Memory struct {
	table      store.Table
	transcript Transcript
	images     Images
	descs      Descriptions
	queue      store.Queue
	compactor  Compactor
	chats      Chats
	forgetter  Forgetter
	ids        *chatid.Registry
	now        func() time.Time
	search     bool
	embedder   Embedder
	claimLease time.Duration
	retry      time.Duration
	wait       time.Duration
	logger     *slog.Logger
	metrics    *emf
	states     states
	lines      *lineCache
	snapshots  *fifo[string, snapshotMemo] // by incarnation partition
	changes    *notifier
	// onMergePass, in tests, sees every merge pass that merged: which view,
	// its size before and after, and whether it is still open.
	onMergePass func(view string, before, after int64, open bool)
}

// New checks cfg and returns a Memory.
func New(cfg Config) (*Memory, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &Memory{
		table:      cfg.Table,
		transcript: cfg.Transcript,
		images:     cfg.Images,
		descs:      cfg.Descriptions,
		queue:      cfg.Queue,
		compactor:  cfg.Compactor,
		chats:      cfg.Chats,
		forgetter:  cfg.Forget,
		ids:        chatid.New(cfg.Table),
		now:        cfg.Now,
		search:     cfg.Search,
		embedder:   cfg.Embedder,
		claimLease: cfg.ClaimLease,
		retry:      cfg.Retry,
		wait:       cfg.Wait,
		logger:     cfg.Logger,
		states:     states{table: cfg.Table, ids: chatid.New(cfg.Table)},
		snapshots:  newFIFO[string, snapshotMemo](snapshotMemos),
		changes:    newNotifier(),
	}
	m.setDefaults()
	if cfg.Metrics != nil {
		m.metrics = &emf{w: cfg.Metrics, now: m.now, function: cfg.MetricsFunction}
	}
	cache := cfg.CacheLines
	if cache == 0 {
		cache = 20_000
	}
	if cache > 0 {
		m.lines = newLineCache(cache)
	}
	return m, nil
}

// check refuses a Config without its required stores or with a negative
// duration.
func (cfg Config) check() error {
	switch {
	case cfg.Table == nil:
		return errors.New("memory: Config.Table is required")
	case cfg.Transcript == nil:
		return errors.New("memory: Config.Transcript is required")
	case cfg.Queue == nil:
		return errors.New("memory: Config.Queue is required")
	case cfg.ClaimLease < 0 || cfg.Retry < 0 || cfg.Wait < 0:
		return errors.New("memory: ClaimLease, Retry and Wait must not be negative")
	}
	return nil
}

// setDefaults gives each setting left at its zero value its default.
func (m *Memory) setDefaults() {
	if m.now == nil {
		m.now = time.Now
	}
	if m.claimLease == 0 {
		m.claimLease = 3 * time.Minute
	}
	if m.retry == 0 {
		m.retry = DefaultRetry
	}
	if m.wait == 0 {
		m.wait = 20 * time.Second
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if m.images == nil {
		m.images = noImages{}
	}
}

type noImages struct{}

func (noImages) Get(context.Context, string, string) (model.Image, error) {
	return model.Image{}, store.ErrNotFound
}

// errRetired: the chat's incarnation was deleted; a write for it is left
// undone.
var errRetired = errors.New("memory: the chat's incarnation was deleted")

// Appended is the transcript's notice that the log of the incarnation c
// now holds length entries: the new leaves join both views and the
// scheduler runs.
func (m *Memory) Appended(ctx context.Context, c chatid.Chat, length int64) error {
	_, err := m.pump(ctx, c, length)
	return err
}

// current is the chat's current incarnation: what a request on the chat
// reads and writes.
func (m *Memory) current(ctx context.Context, tenant, chat string) (chatid.Chat, error) {
	c, _, err := m.ids.Current(ctx, tenant, chat)
	return c, err
}

// opening returns the chat's incarnation for a write, opening one when the
// id has none: settings written before the first append must land in the
// incarnation that append logs into, not in one it never reads.
func (m *Memory) opening(ctx context.Context, tenant, chat string) (chatid.Chat, error) {
	if m.chats != nil {
		return m.chats.Opening(ctx, tenant, chat)
	}
	return m.ids.Open(ctx, tenant, chat)
}

// Pump runs a chat's scheduler: it catches up with the log, resumes an open
// merge pass, takes back lapsed claims and sends the builds that may start.
// Any API call on a chat runs it, so a lost queue message stalls nothing.
func (m *Memory) Pump(ctx context.Context, tenant, chat string) error {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return err
	}
	_, err = m.pump(ctx, c, -1)
	return err
}

// pump is Pump of the incarnation c with a known log length (-1: read it
// from the log). It returns the state as it stands after the run.
func (m *Memory) pump(ctx context.Context, c chatid.Chat, t int64) (*chatState, error) {
	if t < 0 {
		n, err := m.transcript.Len(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("reading the log length of %s: %w", c.ID, err)
		}
		t = n
	}
	now := m.now()
	var sends []Node
	st, err := m.states.update(ctx, c, func(st *chatState) error {
		grew := st.grow(t)
		merged := m.mergePasses(ctx, c.ID, st, m.mergeSizes(ctx, c, st.Gen))
		claims := len(st.Claims)
		var dropped int
		sends, dropped = st.schedule(now, m.claimLease)
		if !grew && merged == 0 && len(sends) == 0 && dropped == 0 && len(st.Claims) == claims {
			return errNoChange
		}
		return nil
	})
	if errors.Is(err, errRetired) {
		return &chatState{}, nil // deleted under this call: nothing to schedule
	}
	if err != nil {
		return nil, err
	}
	m.changes.signal(c)
	if err := m.send(ctx, c, sends); err != nil {
		return st, err
	}
	return st, nil
}

// mergePasses runs both sawtooths after a change and returns the chat view's
// merges. The compaction view also runs a merge pass whenever the chat view
// merged. A failed row read leaves the pass open; it resumes at the next
// change.
func (m *Memory) mergePasses(ctx context.Context, chat string, st *chatState, sizes mergeSizes) int {
	before := st.View.Size
	merged, err := st.View.mergePass(st.T, ViewHigh, ViewLow, false, st, sizes)
	if err != nil {
		m.logger.WarnContext(ctx, "memory: view merge pass paused", "chat", chat, "err", err)
	}
	if merged > 0 && m.onMergePass != nil {
		m.onMergePass("view", before, st.View.Size, st.View.Open)
	}
	before = st.Compact.Size
	cmerged, err := st.Compact.mergePass(st.T, CompactHigh, CompactLow, merged > 0, st, sizes)
	if err != nil {
		m.logger.WarnContext(ctx, "memory: compaction view merge pass paused", "chat", chat, "err", err)
	}
	if cmerged > 0 && m.onMergePass != nil {
		m.onMergePass("compaction", before, st.Compact.Size, st.Compact.Open)
	}
	return merged
}

// mergeSizes answers a merge pass from the parent's row, which records its
// children's line lengths too: one read per merge, cached.
func (m *Memory) mergeSizes(ctx context.Context, c chatid.Chat, gen int64) mergeSizes {
	return func(parent Node) (int64, int64, error) {
		rows, err := m.rows(ctx, c, gen, []Node{parent})
		if err != nil {
			return 0, 0, err
		}
		r, ok := rows[parent]
		if !ok {
			return 0, 0, fmt.Errorf("node %s of %s is marked built but has no row", parent.Label(), c.ID)
		}
		a, b := parent.Children()
		return lineSize(parent, len(r.line)), lineSize(a, r.child[0]) + lineSize(b, r.child[1]), nil
	}
}

// send queues one build message per node, store.MaxSendBatch to a
// request. When the queue fails, the claims of the messages not sent are
// released at once rather than left to lapse.
func (m *Memory) send(ctx context.Context, c chatid.Chat, nodes []Node) error {
	var failed []Node
	var firstErr error
	for chunk := range slices.Chunk(nodes, store.MaxSendBatch) {
		bodies := make([]string, len(chunk))
		for i, n := range chunk {
			bodies[i] = messageBody(c, n)
		}
		err := m.queue.SendBatch(ctx, bodies, 0)
		if err == nil {
			continue
		}
		firstErr = cmp.Or(firstErr, err)
		if be := (*store.BatchError)(nil); errors.As(err, &be) {
			for _, i := range be.Failed {
				failed = append(failed, chunk[i])
			}
		} else {
			failed = append(failed, chunk...)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	_, err := m.states.update(ctx, c, func(st *chatState) error {
		for _, n := range failed {
			if k, ok := st.claimOf(n); ok && st.Claims[k].Owner == "" {
				st.Claims = append(st.Claims[:k], st.Claims[k+1:]...)
			}
		}
		st.setError(m.now(), "queue: "+firstErr.Error())
		return nil
	})
	if err != nil {
		m.logger.WarnContext(ctx, "memory: releasing unsent claims", "chat", c.ID, "err", err)
	}
	return fmt.Errorf("queueing %d builds of %s: %w", len(failed), c.ID, firstErr)
}

// messageBody is the queue message that builds node n of the incarnation c.
func messageBody(c chatid.Chat, n Node) string {
	msg := tasks.For(tasks.Build, c)
	msg.L, msg.I = n.L, n.I
	return msg.Body()
}

// nodeRow is a node as stored: written once, never changed.
type nodeRow struct {
	Text string `json:"t"`
	// Child are a merge's two child line lengths, so a view's merge pass learns a
	// merge's effect from this one row.
	Child       [2]int   `json:"c,omitempty"`
	Verbatim    bool     `json:"v,omitempty"`
	Mechanical  bool     `json:"m,omitempty"`
	Attempts    int      `json:"a,omitempty"`
	Model       string   `json:"md,omitempty"`
	SourceBytes int      `json:"sb,omitempty"`
	Images      []string `json:"im,omitempty"`
	Attached    int      `json:"ia,omitempty"`
	Skipped     int      `json:"is,omitempty"`
	NamesOnly   bool     `json:"io,omitempty"`
	// The rest of a leaf's image counts (leafImages), so that the delivery
	// recording a row another wrote counts them as its builder did.
	Named          int   `json:"in,omitempty"`
	Missing        int   `json:"ix,omitempty"`
	Resent         int   `json:"iz,omitempty"`
	Described      int   `json:"id,omitempty"`
	DescribeFailed int   `json:"if,omitempty"`
	Undescribed    int   `json:"ip,omitempty"`
	BuiltAt        int64 `json:"at,omitempty"`
	// Called: the line cost a model call. The row carries it so that the
	// delivery that records the row counts the call, whichever it is.
	Called bool `json:"mc,omitempty"`
	// Gen is the erasure generation of the state the build started from:
	// a row older than an erasure that took its node back is not its line.
	Gen int64 `json:"g,omitempty"`
}

// nodeInfo is what readers need from a row.
type nodeInfo struct {
	line       string
	child      [2]int
	verbatim   bool
	mechanical bool
	images     []string
}

func nodeKey(c chatid.Chat, n Node) store.Key {
	return store.Key{PK: c.PK(), SK: store.NodeSK(n.L, n.I)}
}

// batchLimit is DynamoDB's BatchGetItem key limit; reads are chunked to it.
const batchLimit = 100

// rows reads the given nodes' rows (from the cache when it can); nodes
// with no row are absent from the answer.
//
// gen is the erasure generation of the state the caller read (chatState.Gen):
// the cache keeps lines by it, so a line an erasure took back is never
// served from any process's cache.
func (m *Memory) rows(ctx context.Context, c chatid.Chat, gen int64, nodes []Node) (map[Node]nodeInfo, error) {
	out := make(map[Node]nodeInfo, len(nodes))
	pk := cacheKey(c, gen)
	var missing []Node
	for _, n := range nodes {
		if info, ok := m.lines.get(pk, n); ok {
			out[n] = info
			continue
		}
		missing = append(missing, n)
	}
	for len(missing) > 0 {
		chunk := missing[:min(len(missing), batchLimit)]
		missing = missing[len(chunk):]
		keys := make([]store.Key, len(chunk))
		asked := make(map[string]Node, len(chunk))
		for k, n := range chunk {
			keys[k] = nodeKey(c, n)
			asked[keys[k].SK] = n
		}
		items, err := m.table.BatchGet(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("reading %d node rows of %s: %w", len(keys), c.ID, err)
		}
		for _, it := range items {
			n, ok := asked[it.SK]
			if !ok {
				continue
			}
			var r nodeRow
			if err := json.Unmarshal(it.Body, &r); err != nil {
				return nil, fmt.Errorf("node %s of %s is corrupt: %w", n.Label(), c.ID, err)
			}
			info := nodeInfo{line: Line(r.Text), child: r.Child, verbatim: r.Verbatim, mechanical: r.Mechanical, images: r.Images}
			m.lines.put(pk, n, info)
			out[n] = info
		}
	}
	return out, nil
}

// readRow reads one full node row.
func (m *Memory) readRow(ctx context.Context, c chatid.Chat, n Node) (nodeRow, error) {
	r, _, err := m.readRowVersion(ctx, c, n)
	return r, err
}

// readRowVersion is readRow with the item's version.
func (m *Memory) readRowVersion(ctx context.Context, c chatid.Chat, n Node) (nodeRow, int64, error) {
	it, err := m.table.Get(ctx, nodeKey(c, n))
	if err != nil {
		return nodeRow{}, 0, err
	}
	var r nodeRow
	if err := json.Unmarshal(it.Body, &r); err != nil {
		return nodeRow{}, 0, fmt.Errorf("node %s of %s is corrupt: %w", n.Label(), c.ID, err)
	}
	return r, it.Version, nil
}

// cacheKey keys what a process caches of the incarnation c (its lines,
// what it knows of its view snapshot) at erasure generation gen.
func cacheKey(c chatid.Chat, gen int64) string {
	if gen == 0 {
		return c.PK()
	}
	return c.PK() + "#" + strconv.FormatInt(gen, 10)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lineCache keeps recently read node lines, keyed by the partition of the
// chat's incarnation. Rows never change, and a chat deleted and created
// again is another incarnation with another partition, so an entry is
// never stale; the cache only bounds memory, evicting the oldest.
type lineCache struct {
	lines *fifo[lineKey, nodeInfo]
}

type lineKey struct {
	key string // cacheKey
	n   Node
}

func newLineCache(max int) *lineCache {
	return &lineCache{lines: newFIFO[lineKey, nodeInfo](max)}
}

func (c *lineCache) get(pk string, n Node) (nodeInfo, bool) {
	if c == nil {
		return nodeInfo{}, false
	}
	return c.lines.get(lineKey{pk, n})
}

func (c *lineCache) put(pk string, n Node, info nodeInfo) {
	if c == nil {
		return
	}
	c.lines.put(lineKey{pk, n}, info)
}

// fifo is a map of at most max entries that forgets the oldest put first.
type fifo[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	items map[K]V
	order []K
	next  int
}

func newFIFO[K comparable, V any](max int) *fifo[K, V] {
	return &fifo[K, V]{max: max, items: make(map[K]V, max)}
}

func (c *fifo[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.items[k]
	return v, ok
}

// put sets k to v; a key already held keeps its place in the order.
func (c *fifo[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		c.items[k] = v
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, k)
	} else {
		delete(c.items, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	c.items[k] = v
}

// forget drops k. Its place in the order stays taken until it comes round,
// so a key put again meanwhile may be forgotten early: a miss, nothing
// worse.
func (c *fifo[K, V]) forget(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, k)
}

// notifier wakes this process's view waiters when it changes a chat's
// state; waiters also poll, since builds may run in another process.
type notifier struct {
	mu    sync.Mutex
	chans map[string]*waiters
}

type waiters struct {
	ch chan struct{}
	n  int
}

func newNotifier() *notifier { return &notifier{chans: map[string]*waiters{}} }

// watch returns a channel closed at the chat's next change, and a release
// to call when done waiting.
func (n *notifier) watch(c chatid.Chat) (<-chan struct{}, func()) {
	k := c.PK()
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.chans[k]
	if !ok {
		w = &waiters{ch: make(chan struct{})}
		n.chans[k] = w
	}
	w.n++
	return w.ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		w.n--
		if cur, ok := n.chans[k]; ok && cur == w && w.n == 0 {
			delete(n.chans, k)
		}
	}
}

func (n *notifier) signal(c chatid.Chat) {
	k := c.PK()
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.chans[k]; ok {
		close(w.ch)
		delete(n.chans, k)
	}
}
