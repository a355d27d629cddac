package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// memTable is the in-memory table of storefake, counting its calls, with
// an injectable fault, and holding memory to DynamoDB's 100 keys a BatchGet.
type memTable struct {
	*storefake.Table
	gets    atomic.Int64
	batches atomic.Int64
	writes  atomic.Int64

	mu sync.Mutex
	// fail, when set, is asked before each call.
	fail func(op string, k store.Key) error
	// lose, when set, is asked after each write that succeeded: an error
	// is the write's answer, as a client gives that lost the answer (a
	// timeout), or that sent the write again (a failed condition).
	lose func(op string, k store.Key) error
}

// lost answers err, or what lose says of a write that succeeded.
func (t *memTable) lost(op string, k store.Key, err error) error {
	t.mu.Lock()
	f := t.lose
	t.mu.Unlock()
	if err == nil && f != nil {
		return f(op, k)
	}
	return err
}

func (t *memTable) setLose(f func(op string, k store.Key) error) {
	t.mu.Lock()
	t.lose = f
	t.mu.Unlock()
}

func newMemTable() *memTable { return &memTable{Table: storefake.NewTable()} }

func (t *memTable) check(op string, k store.Key) error {
	t.mu.Lock()
	f := t.fail
	t.mu.Unlock()
	if f != nil {
		return f(op, k)
	}
	return nil
}

func (t *memTable) setFail(f func(op string, k store.Key) error) {
	t.mu.Lock()
	t.fail = f
	t.mu.Unlock()
}

func (t *memTable) Get(ctx context.Context, k store.Key) (store.Item, error) {
	t.gets.Add(1)
	if err := t.check("get", k); err != nil {
		return store.Item{}, err
	}
	return t.Table.Get(ctx, k)
}

func (t *memTable) Create(ctx context.Context, it store.Item) error {
	t.writes.Add(1)
	if err := t.check("create", it.Key); err != nil {
		return err
	}
	return t.lost("create", it.Key, t.Table.Create(ctx, it))
}

func (t *memTable) Update(ctx context.Context, it store.Item) error {
	t.writes.Add(1)
	if err := t.check("update", it.Key); err != nil {
		return err
	}
	return t.lost("update", it.Key, t.Table.Update(ctx, it))
}

func (t *memTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := t.check("query", store.Key{PK: q.PK}); err != nil {
		return store.Page{}, err
	}
	return t.Table.Query(ctx, q)
}

func (t *memTable) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	t.batches.Add(1)
	if len(keys) > 100 {
		return nil, fmt.Errorf("BatchGet of %d keys: at most 100", len(keys))
	}
	for _, k := range keys {
		if err := t.check("batchget", k); err != nil {
			return nil, err
		}
	}
	return t.Table.BatchGet(ctx, keys)
}

// stateBytes is the size of a chat's state item.
func (t *memTable) stateBytes(c chatid.Chat) int {
	it, _ := t.Table.Get(context.Background(), stateKey(c))
	return it.Size()
}

// fakeLog is a Transcript over a slice; append notifies nothing by itself.
type fakeLog struct {
	mu      sync.Mutex
	entries map[string][]transcript.Entry
	fail    error
	read    int // entries Entries returned
}

func newFakeLog() *fakeLog { return &fakeLog{entries: map[string][]transcript.Entry{}} }

func (l *fakeLog) add(chat, kind, text string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := int64(len(l.entries[chat]))
	l.entries[chat] = append(l.entries[chat], transcript.Entry{I: i, Kind: kind, Text: text, Date: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute), Of: -1})
	return i
}

func (l *fakeLog) addEntry(chat string, e transcript.Entry) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.I = int64(len(l.entries[chat]))
	l.entries[chat] = append(l.entries[chat], e)
	return e.I
}

func (l *fakeLog) Len(_ context.Context, c chatid.Chat) (int64, error) {
	chat := c.ID
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	return int64(len(l.entries[chat])), nil
}

func (l *fakeLog) Entries(_ context.Context, c chatid.Chat, from, to int64) ([]transcript.Entry, error) {
	chat := c.ID
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	es := l.entries[chat]
	to = min(to, int64(len(es)))
	if from >= to {
		return nil, nil
	}
	l.read += int(to - from)
	return append([]transcript.Entry(nil), es[from:to]...), nil
}

// fakeImages is an Images over a map, with an injectable outage.
type fakeImages struct {
	mu   sync.Mutex
	imgs map[string]model.Image
	fail error
	gets int
}

func (f *fakeImages) Get(_ context.Context, _, name string) (model.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.fail != nil {
		return model.Image{}, f.fail
	}
	img, ok := f.imgs[name]
	if !ok {
		return model.Image{}, store.ErrNotFound
	}
	return img, nil
}

func (f *fakeImages) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

// sent is one queued message.
type sent struct {
	msg   tasks.Message
	delay time.Duration
}

// recQueue records what is sent; tests deliver by hand.
type recQueue struct {
	mu      sync.Mutex
	msgs    []sent
	batches []int             // bodies per SendBatch
	refuse  func(string) bool // bodies SendBatch names as not sent
	fail    error
}

func (q *recQueue) Send(_ context.Context, body string, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return q.fail
	}
	m, err := tasks.Decode(body)
	if err != nil {
		return err
	}
	q.msgs = append(q.msgs, sent{msg: m, delay: delay})
	return nil
}

// SendBatch records each body as Send does, and counts the batches.
func (q *recQueue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return err
	}
	q.mu.Lock()
	q.batches = append(q.batches, len(bodies))
	refuse := q.refuse
	q.mu.Unlock()
	var be store.BatchError
	for i, b := range bodies {
		if refuse != nil && refuse(b) {
			be.Failed = append(be.Failed, i)
			be.Err = cmp.Or(be.Err, error(store.Unavailable("send batch entry", errors.New("refused"))))
			continue
		}
		if err := q.Send(ctx, b, delay); err != nil {
			return err
		}
	}
	if len(be.Failed) > 0 {
		return &be
	}
	return nil
}

// take removes and returns everything sent so far.
func (q *recQueue) take() []sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// scripted is a Compactor that writes "S<label>: <start of source>" lines
// and counts its calls per node; script, when set, decides instead.
type scripted struct {
	mu       sync.Mutex
	calls    map[string]int
	seen     []CompactRequest
	lastSeen CompactRequest
	script   func(c CompactRequest) (Compacted, error)
	delay    time.Duration
	// lineLen is the length of the lines it writes (default 120).
	lineLen int
}

func newScripted() *scripted { return &scripted{calls: map[string]int{}} }

func (s *scripted) Compact(ctx context.Context, c CompactRequest) (Compacted, error) {
	s.mu.Lock()
	s.calls[c.Label]++
	s.lastSeen = c
	c.Context = "" // kept for the last call only: a long run would hold them all
	s.seen = append(s.seen, c)
	script, delay, n := s.script, s.delay, s.lineLen
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return Compacted{}, ctx.Err()
		}
	}
	if script != nil {
		return script(c)
	}
	return Compacted{Line: scriptedLine(c.Label, c.Source, n), Attempts: 1, Model: "scripted", Attached: len(c.Images)}, nil
}

// scriptedLine is the line scripted writes: "S<label>: <source>", cut or
// padded to n bytes (120 when n is 0).
func scriptedLine(label, source string, n int) string {
	if n == 0 {
		n = 120
	}
	line := fmt.Sprintf("S%s: %s", label, Line(source))
	if len(line) > n {
		line = line[:n]
	}
	for len(line) < n {
		line += "."
	}
	return line
}

// grouping is scripted that also writes groups (a GroupCompactor): one
// call per group, each line as scripted writes it, a merge over a line of
// the group from that line; groupScript, when set, decides instead.
type grouping struct {
	*scripted
	gmu         sync.Mutex
	groups      [][]string // the labels of each group call
	groupScript func(g Group) ([]Compacted, error)
	problems    []string // groups memory should not have sent
}

func newGrouping() *grouping { return &grouping{scripted: newScripted()} }

func (s *grouping) CompactGroup(ctx context.Context, g Group) ([]Compacted, error) {
	labels := make([]string, len(g.Nodes))
	for k, c := range g.Nodes {
		labels[k] = c.Label
	}
	s.gmu.Lock()
	s.groups = append(s.groups, labels)
	script := s.groupScript
	s.gmu.Unlock()
	s.mu.Lock()
	n := s.lineLen
	s.mu.Unlock()
	if script != nil {
		return script(g)
	}
	outs := make([]Compacted, len(g.Nodes))
	lines := map[string]string{}
	for k, c := range g.Nodes {
		source := c.Source
		if c.Level > 0 && source == "" {
			a, b := Node{L: c.Level, I: c.Index}.Children()
			ls := c.Children
			for j, child := range []Node{a, b} {
				if ls[j] != "" {
					continue
				}
				l, ok := lines[child.Label()]
				if !ok {
					// Memory must give a child it does not write here.
					err := fmt.Errorf("group merge %s: child %s is neither given nor a node before it", c.Label, child.Label())
					s.gmu.Lock()
					s.problems = append(s.problems, err.Error())
					s.gmu.Unlock()
					return nil, err
				}
				ls[j] = l
			}
			source = MergeSource(ls[0], ls[1])
		}
		if len(c.Images) == 0 && len(source) <= LineBytes {
			outs[k] = Compacted{Line: source, Verbatim: true, Model: "scripted"}
		} else {
			outs[k] = Compacted{Line: scriptedLine(c.Label, source, n), Attempts: 1, Model: "scripted", Attached: len(c.Images)}
		}
		lines[c.Label] = Line(outs[k].Line)
	}
	return outs, nil
}

// groupCalls is the number of group calls, and written the labels they
// wrote lines for, over all of them.
func (s *grouping) groupCalls() (calls int, labels []string) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	for _, g := range s.groups {
		labels = append(labels, g...)
	}
	return len(s.groups), labels
}

// groupProblems are the groups memory should not have sent.
func (s *grouping) groupProblems() []string {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	return slices.Clone(s.problems)
}

func (s *scripted) callsOf(label string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[label]
}

func (s *scripted) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

func (s *scripted) last() CompactRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen
}

// fixture is a Memory over fakes, driven by hand.
type fixture struct {
	m      *Memory
	table  *memTable
	log    *fakeLog
	images *fakeImages
	queue  *recQueue
	comp   *scripted
	clock  *clock
	tenant string
	chat   string
	// retrier, when set, delays the failed messages of a batch in place.
	retrier tasks.Retrier
}

// consumer runs the queue's messages as the programs do, with memory's
// builds as their one kind.
func (f *fixture) consumer() *tasks.Consumer {
	return newConsumer(f.m, f.queue, f.retrier)
}

// newConsumer is the queue's consumer over m's builds, as the programs
// wire it.
func newConsumer(m *Memory, q store.Queue, r tasks.Retrier) *tasks.Consumer {
	return tasks.NewConsumer(tasks.Config{
		Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: m.BuildTask}),
		Queue:  q, Retrier: r, Visibility: m.ClaimLease(), Logger: m.logger,
	})
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		table: newMemTable(), log: newFakeLog(), images: &fakeImages{imgs: map[string]model.Image{}},
		queue: &recQueue{}, comp: newScripted(), clock: newClock(), tenant: "t1", chat: "c1",
	}
	m, err := New(Config{Table: f.table, Transcript: f.log, Images: f.images, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// append logs entries and notifies memory, as the transcript does.
// ch is the fixture's chat as it is now. Over the fake log nothing opens an
// incarnation, so it is incarnation "" (also when the table is failing).
func (f *fixture) ch() chatid.Chat {
	c, _, err := f.m.ids.Current(context.Background(), f.tenant, f.chat)
	if err != nil {
		return chatid.Chat{Tenant: f.tenant, ID: f.chat}
	}
	return c
}

func (f *fixture) append(t testing.TB, kind string, texts ...string) {
	t.Helper()
	var n int64
	for _, text := range texts {
		n = f.log.add(f.chat, kind, text) + 1
	}
	if err := f.m.Appended(context.Background(), f.ch(), n); err != nil {
		t.Fatal(err)
	}
}

// deliverAll builds every queued message, and what those queue, until the
// queue is empty; messages asking to come back later are returned.
func (f *fixture) deliverAll(t testing.TB) (later []sent) {
	t.Helper()
	for {
		msgs := f.queue.take()
		if len(msgs) == 0 {
			return later
		}
		for _, s := range msgs {
			if s.delay > 0 {
				later = append(later, s)
				continue
			}
			if err := f.m.Build(context.Background(), s.msg.Tenant, s.msg.Chat, s.msg.L, s.msg.I); err != nil {
				delay := time.Second
				if re := (*RetryError)(nil); errors.As(err, &re) && re.After > 0 {
					delay = re.After
				}
				later = append(later, sent{msg: s.msg, delay: delay})
			}
		}
	}
}

func (f *fixture) state(t testing.TB) *chatState {
	t.Helper()
	st, _, err := f.m.states.get(context.Background(), f.ch())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) row(t testing.TB, n Node) (nodeRow, bool) {
	t.Helper()
	r, err := f.m.readRow(context.Background(), f.ch(), n)
	if err != nil {
		return nodeRow{}, false
	}
	return r, true
}

func nodesOf(msgs []sent) []Node {
	var out []Node
	for _, s := range msgs {
		out = append(out, Node{L: s.msg.L, I: s.msg.I})
	}
	return out
}
