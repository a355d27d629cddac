package memory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storetest"
	"github.com/durachat/durachat/shared/testenv"
)

// The turn of a chat the view-read measurements log: a user message and
// three assistant ones, in bytes. The 700 and 900 byte ones are summarized
// (to turnLineBytes), the others kept word for word.
var turnSizes = []int{200, 700, 150, 900}

const turnLineBytes = 400

var proseWords = strings.Fields(`we moved the retry loop out of the handler because the queue
redelivers anyway and the lease keeps a second builder away; the tests pass on both stores now,
but the view still reads every row when the cache is cold, so the next step is one item per view`)

// prose is n bytes of plausible words, the same for the same seed.
func prose(seed, n int) string {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(proseWords[rng.IntN(len(proseWords))])
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}

// talk logs turns of turnSizes messages and builds them, 16 turns between
// builds.
func talk(tb testing.TB, f *fixture, turns int) {
	tb.Helper()
	ctx := context.Background()
	for t := 0; t < turns; {
		for k := 0; k < 16 && t < turns; k, t = k+1, t+1 {
			for j, size := range turnSizes {
				kind := "assistant"
				if j == 0 {
					kind = "user"
				}
				n, _ := f.log.Len(ctx, f.ch())
				f.log.add(f.chat, kind, prose(int(n), size))
			}
		}
		n, _ := f.log.Len(ctx, f.ch())
		if err := f.m.Appended(ctx, f.ch(), n); err != nil {
			tb.Fatal(err)
		}
		f.deliverAll(tb)
		f.comp.mu.Lock()
		f.comp.seen = nil // a long chat would keep every compaction
		f.comp.mu.Unlock()
	}
}

// talkedChats keeps the chats built once per test binary, by size.
var talkedChats struct {
	sync.Mutex
	byTurns map[int]*fixture
}

// talkedChat is a fixture whose chat logged turns turns, fully built, on
// the in-memory table; a copy of the one built first for that size.
func talkedChat(tb testing.TB, turns int) *fixture {
	tb.Helper()
	talkedChats.Lock()
	defer talkedChats.Unlock()
	src, ok := talkedChats.byTurns[turns]
	if !ok {
		src = newFixture(tb)
		src.comp.lineLen = turnLineBytes
		talk(tb, src, turns)
		if talkedChats.byTurns == nil {
			talkedChats.byTurns = map[int]*fixture{}
		}
		talkedChats.byTurns[turns] = src
	}
	f := newFixture(tb)
	f.comp.lineLen = turnLineBytes
	ctx := context.Background()
	pk := src.ch().PK()
	for after := ""; ; {
		page, err := src.table.Table.Query(ctx, store.Query{PK: pk, After: after})
		if err != nil {
			tb.Fatal(err)
		}
		for _, it := range page.Items {
			if err := f.table.Table.Create(ctx, it); err != nil {
				tb.Fatal(err)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	src.log.mu.Lock()
	f.log.entries[f.chat] = append(f.log.entries[f.chat], src.log.entries[src.chat]...)
	src.log.mu.Unlock()
	return f
}

// viewTarget is a store a chat's view is read from: it holds a copy of
// what the view needs of the fixture's chat (its state item and the rows
// of its view's nodes), synced after each turn; the view is read through
// a meter.
type viewTarget struct {
	name   string
	table  store.Table // unmetered, for the copy
	meter  *storetest.Meter
	copied map[Node]bool
	// capacity is what the server reported consumed (dynalite); nil
	// elsewhere.
	capacity *consumedCapacity
}

func viewTargets(tb testing.TB) []*viewTarget {
	tb.Helper()
	emb := testenv.Embedded(tb)
	out := []*viewTarget{{name: "embedded", table: emb.Table}}
	if !testing.Short() {
		d := awstest.StartDynalite(tb)
		capacity := &consumedCapacity{}
		client := dynamodb.NewFromConfig(awstest.Config(), func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(d.URL)
			o.APIOptions = append(o.APIOptions, capacity.add)
		})
		out = append(out, &viewTarget{name: "dynalite", table: dynamo.New(client, d.CreateTable(tb)), capacity: capacity})
	}
	for _, v := range out {
		v.meter = storetest.NewMeter(v.table)
		v.copied = map[Node]bool{}
	}
	return out
}

// sync copies the fixture chat's state item and the rows of its view's
// nodes not copied yet.
func (v *viewTarget) sync(tb testing.TB, f *fixture) {
	tb.Helper()
	ctx := context.Background()
	key := stateKey(f.ch())
	st, err := f.table.Table.Get(ctx, key)
	if err != nil {
		tb.Fatal(err)
	}
	old, err := v.table.Get(ctx, key)
	switch {
	case err == nil:
		st.Version = old.Version + 1
		err = v.table.Update(ctx, st)
	case errors.Is(err, store.ErrNotFound):
		err = v.table.Create(ctx, st)
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range f.state(tb).View.nodes() {
		if v.copied[n] {
			continue
		}
		it, err := f.table.Table.Get(ctx, nodeKey(f.ch(), n))
		if errors.Is(err, store.ErrNotFound) {
			continue // not built yet
		}
		if err != nil {
			tb.Fatal(err)
		}
		if err := v.table.Create(ctx, it); err != nil {
			tb.Fatal(err)
		}
		v.copied[n] = true
	}
}

// process is a memory-function process serving views from v.
func (v *viewTarget) process(tb testing.TB, f *fixture) *Memory {
	tb.Helper()
	m, err := New(Config{Table: v.meter, Transcript: f.log, Queue: &recQueue{}, Now: f.clock.Now, Logger: discardLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// viewReads is what one view read.
type viewReads struct {
	storetest.Metered
	// ServerReadUnits and ServerWriteUnits are what dynalite reported.
	ServerReadUnits, ServerWriteUnits float64
}

// read reads the view of f's chat through m, checks it is the view the
// rows give, and returns what it read.
func (v *viewTarget) read(tb testing.TB, f *fixture, m *Memory) viewReads {
	tb.Helper()
	before, sr, sw := v.meter.Count(), v.capacity.read(), v.capacity.written()
	got, err := m.ReadView(context.Background(), f.tenant, f.chat, false)
	if err != nil {
		tb.Fatal(err)
	}
	reads := viewReads{Metered: v.meter.Count().Sub(before), ServerReadUnits: v.capacity.read() - sr, ServerWriteUnits: v.capacity.written() - sw}
	if want := rowsView(tb, f); got != want {
		tb.Fatalf("%s: the view read differs from the one its rows give:\n got %+v\nwant %+v", v.name, brief(got), brief(want))
	}
	return reads
}

// rowsView is the view of f's chat as its state and its rows give it,
// read by a process with no line cache.
func rowsView(tb testing.TB, f *fixture) wire.View {
	tb.Helper()
	return stateView(tb, f, f.state(tb))
}

// stateView is the view st gives with the rows in f's process's table.
func stateView(tb testing.TB, f *fixture, st *chatState) wire.View {
	tb.Helper()
	nodes := st.View.nodes()
	var built []Node
	for _, n := range nodes {
		if st.built(n) {
			built = append(built, n)
		}
	}
	rows := cachelessRows(tb, f, built)
	var unbuilt int64
	text := renderLines(nodes, func(n Node) (string, bool) {
		if info, ok := rows[n]; ok && st.built(n) {
			return info.line, true
		}
		unbuilt++
		return "", false
	})
	return wire.View{
		View: text, Lines: int64(len(nodes)), Bytes: int64(len(text) - len("<chat>\n") - len("</chat>")),
		Unbuilt: unbuilt, Retrying: st.waiting(), Stalled: st.stalled(), LastError: st.LastError,
	}
}

// cachelessRows reads the rows of nodes from the table of f's process,
// through no line cache and no snapshot.
func cachelessRows(tb testing.TB, f *fixture, nodes []Node) map[Node]nodeInfo {
	tb.Helper()
	m, err := New(Config{Table: f.m.table, Transcript: f.log, Queue: &recQueue{}, Now: f.clock.Now, Logger: discardLogger(), CacheLines: -1})
	if err != nil {
		tb.Fatal(err)
	}
	rows, err := m.rows(context.Background(), f.ch(), 0, nodes)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// brief shortens a view for a failure message.
func brief(v wire.View) wire.View {
	if len(v.View) > 300 {
		v.View = v.View[:150] + " ... " + v.View[len(v.View)-150:]
	}
	return v
}

// consumedCapacity sums the capacity DynamoDB reports (asked for on every
// request).
type consumedCapacity struct {
	mu          sync.Mutex
	reads, wrts float64
}

func (c *consumedCapacity) read() float64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func (c *consumedCapacity) written() float64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wrts
}

func (c *consumedCapacity) add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("consumedCapacity", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		total := types.ReturnConsumedCapacityTotal
		switch p := in.Parameters.(type) {
		case *dynamodb.GetItemInput:
			p.ReturnConsumedCapacity = total
		case *dynamodb.BatchGetItemInput:
			p.ReturnConsumedCapacity = total
		case *dynamodb.QueryInput:
			p.ReturnConsumedCapacity = total
		case *dynamodb.PutItemInput:
			p.ReturnConsumedCapacity = total
		case *dynamodb.DeleteItemInput:
			p.ReturnConsumedCapacity = total
		}
		out, md, err := next.HandleInitialize(ctx, in)
		var r, w []types.ConsumedCapacity
		switch o := out.Result.(type) {
		case *dynamodb.GetItemOutput:
			r = append(r, deref(o.ConsumedCapacity)...)
		case *dynamodb.BatchGetItemOutput:
			r = o.ConsumedCapacity
		case *dynamodb.QueryOutput:
			r = append(r, deref(o.ConsumedCapacity)...)
		case *dynamodb.PutItemOutput:
			w = append(w, deref(o.ConsumedCapacity)...)
		case *dynamodb.DeleteItemOutput:
			w = append(w, deref(o.ConsumedCapacity)...)
		}
		c.mu.Lock()
		for _, cc := range r {
			c.reads += aws.ToFloat64(cc.CapacityUnits)
		}
		for _, cc := range w {
			c.wrts += aws.ToFloat64(cc.CapacityUnits)
		}
		c.mu.Unlock()
		return out, md, err
	}), middleware.After)
}

func deref(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// viewTurns is the chat the view-read measurements read: 25,000 turns
// of 4 messages, 100,000 messages.
const viewTurns = 25_000

// BenchmarkViewReads100k counts what a view of a 100,000-message chat
// reads from the table, on the embedded store and on dynalite: first
// the chat as it stands, from a process whose line cache is cold; then,
// each iteration, after one more turn of 4 messages is logged and built,
// from a new process (cold: its line cache is empty, as in a process
// serving many chats) and from one that read every view before (warm).
// Items, request units (as billed, and as dynalite reports them) and
// requests are per view; each view is checked against the view the rows
// give. Run it with -benchtime 48x: a turn is one iteration.
func BenchmarkViewReads100k(b *testing.B) {
	for _, v := range viewTargets(b) {
		b.Run(v.name, func(b *testing.B) {
			f := talkedChat(b, viewTurns)
			v.sync(b, f)
			first := v.read(b, f, v.process(b, f))
			warm := v.process(b, f)
			v.read(b, f, warm)
			var cold, hot viewReads
			maxCold := 0
			for b.Loop() {
				talk(b, f, 1)
				v.sync(b, f)
				c := v.read(b, f, v.process(b, f))
				h := v.read(b, f, warm)
				cold, hot = cold.plus(c), hot.plus(h)
				maxCold = max(maxCold, c.Items)
			}
			n := float64(b.N)
			st := f.state(b)
			b.ReportMetric(float64(st.View.lines()), "lines")
			b.ReportMetric(float64(st.View.Size), "view-bytes")
			if it, err := v.table.Get(context.Background(), snapshotKey(f.ch())); err == nil {
				b.ReportMetric(float64(it.Size()), "snapshot-bytes")
			}
			b.ReportMetric(float64(first.Items), "first-items")
			b.ReportMetric(float64(first.ReadUnits), "first-RRU")
			b.ReportMetric(float64(cold.Items)/n, "cold-items/view")
			b.ReportMetric(float64(maxCold), "cold-items-max")
			b.ReportMetric(float64(cold.ReadUnits)/n, "cold-RRU/view")
			b.ReportMetric(float64(cold.Requests)/n, "cold-requests/view")
			b.ReportMetric(float64(hot.Items)/n, "warm-items/view")
			b.ReportMetric(float64(hot.ReadUnits)/n, "warm-RRU/view")
			b.ReportMetric(float64(cold.WriteUnits+hot.WriteUnits)/(2*n), "WRU/view")
			if v.capacity != nil {
				b.ReportMetric(first.ServerReadUnits, "first-RRU-server")
				b.ReportMetric(cold.ServerReadUnits/n, "cold-RRU-server/view")
				b.ReportMetric(hot.ServerReadUnits/n, "warm-RRU-server/view")
				b.ReportMetric((cold.ServerWriteUnits+hot.ServerWriteUnits)/(2*n), "WRU-server/view")
			}
		})
	}
}

func (r viewReads) plus(o viewReads) viewReads {
	return viewReads{
		Metered:         r.Metered.Add(o.Metered),
		ServerReadUnits: r.ServerReadUnits + o.ServerReadUnits, ServerWriteUnits: r.ServerWriteUnits + o.ServerWriteUnits,
	}
}

func (r viewReads) String() string {
	return fmt.Sprintf("%d items, %d read units, %d write units, %d requests", r.Items, r.ReadUnits, r.WriteUnits, r.Requests)
}
