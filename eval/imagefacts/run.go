package imagefacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// Stores are the backends one arm runs on. Each arm needs its own: the
// chats have the same names in both.
type Stores struct {
	Table    store.Table
	Blobs    store.Blobs
	Queue    store.Queue
	Receiver store.Receiver
}

// Setup is one arm of the evaluation.
type Setup struct {
	// Name labels the arm in the table ("before", "after").
	Name   string
	Stores Stores
	// Model writes the lines; wrap it in TextOnly for the "before" arm.
	Model     model.Model
	Compactor compactor.Options
	// Tenant owns the chats; "eval" when empty.
	Tenant        string
	Facts         []Fact
	Conversations []Conversation
	// Workers bounds the builds at once (tasks.DefaultWorkers when 0).
	Workers int
	// Poll is how often build progress is checked (100 ms when 0).
	Poll time.Duration
	// Logger receives memory's records (discarded when nil).
	Logger *slog.Logger
}

// Levels of the tree the evaluation grades.
const (
	AtLeaf = iota
	AtParent
	AtRoot
	levels
)

var levelNames = [levels]string{"leaf", "parent", "root"}

// Miss is a graded node that does not state its image's fact, or states
// the fact of an image its chat never sent.
type Miss struct {
	Chat  string
	Node  string // "(level, index)"
	Fact  string
	Line  string
	Other bool // the line states another image's fact
}

// Result is one arm's measurement.
type Result struct {
	Name          string
	Model         string
	Conversations int
	// Found counts, per level, the conversations whose image fact the
	// node states.
	Found [levels]int
	// Invented counts node lines that state a fact of an image their chat
	// never sent.
	Invented int
	// Images sums memory's per-leaf image counts over the chats.
	Images wire.ImageCounts
	Usage  Usage
	Misses []Miss
	// Elapsed is the wall time from the first append to the last build.
	Elapsed time.Duration
}

// Share is the fraction of conversations whose fact is found at level.
func (r Result) Share(level int) float64 {
	if r.Conversations == 0 {
		return 0
	}
	return float64(r.Found[level]) / float64(r.Conversations)
}

// Run logs every conversation through the real transcript into a real
// memory whose compactor is the real compactor over s.Model, runs the
// in-process build worker until every node of every chat is built, and
// grades the leaf of each image's message, its parent and the chat's
// root. It fails when ctx ends first, naming the chats still unbuilt and
// their last error.
func Run(ctx context.Context, s Setup) (Result, error) {
	if s.Stores.Table == nil || s.Stores.Blobs == nil || s.Stores.Queue == nil || s.Stores.Receiver == nil {
		return Result{}, errors.New("imagefacts: Setup.Stores needs a table, blobs, a queue and its receiver")
	}
	if s.Model == nil {
		return Result{}, errors.New("imagefacts: Setup.Model is required")
	}
	tenant := s.Tenant
	if tenant == "" {
		tenant = "eval"
	}
	poll := s.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := s.Compactor.Validate(); err != nil {
		return Result{}, err
	}

	meter := NewMeter(s.Model)
	imgs := images.New(s.Stores.Blobs)
	log := transcript.New(transcript.Config{Table: s.Stores.Table, Blobs: s.Stores.Blobs, Images: imgs})
	mem, err := memory.New(memory.Config{
		Table: s.Stores.Table, Transcript: log, Images: imgs, Descriptions: imgs, Queue: s.Stores.Queue,
		Compactor: compactor.New(meter, s.Compactor), Logger: logger,
	})
	if err != nil {
		return Result{}, err
	}
	// Builds are the one kind of task here: no chat is deleted.
	builds := tasks.NewConsumer(tasks.Config{
		Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: mem.BuildTask}),
		Queue:  s.Stores.Queue, Workers: s.Workers, Visibility: mem.ClaimLease(), Logger: logger,
	})
	wctx, stop := context.WithCancel(ctx)
	worker := make(chan error, 1)
	go func() { worker <- builds.Worker(wctx, s.Stores.Receiver) }()
	defer func() {
		stop()
		<-worker
	}()

	started := time.Now()
	for _, c := range s.Conversations {
		ch, ids, err := log.AppendChat(ctx, tenant, c.Chat, c.Messages, c.Chat+"/all")
		if err != nil {
			return Result{}, fmt.Errorf("imagefacts: logging %s: %w", c.Chat, err)
		}
		if len(ids) != ChatEntries {
			return Result{}, fmt.Errorf("imagefacts: %s logged as %d entries, want %d (one per message)", c.Chat, len(ids), ChatEntries)
		}
		if err := mem.Appended(ctx, ch, ids[len(ids)-1]+1); err != nil {
			return Result{}, fmt.Errorf("imagefacts: scheduling %s: %w", c.Chat, err)
		}
	}
	if err := waitBuilt(ctx, mem, tenant, s.Conversations, poll); err != nil {
		return Result{}, err
	}
	res := Result{Name: s.Name, Model: s.Model.Name(), Conversations: len(s.Conversations), Elapsed: time.Since(started)}
	for _, c := range s.Conversations {
		if err := grade(ctx, mem, tenant, c, s.Facts, &res); err != nil {
			return Result{}, err
		}
		st, err := mem.Status(ctx, tenant, c.Chat)
		if err != nil {
			return Result{}, fmt.Errorf("imagefacts: status of %s: %w", c.Chat, err)
		}
		res.Images.Leaves += st.Images.Leaves
		res.Images.Attached += st.Images.Attached
		res.Images.Skipped += st.Images.Skipped
		res.Images.Missing += st.Images.Missing
		res.Images.NamesOnly += st.Images.NamesOnly
		res.Images.Described += st.Images.Described
		res.Images.DescribeFailed += st.Images.DescribeFailed
		res.Images.DescribePending += st.Images.DescribePending
	}
	res.Usage = meter.Usage()
	return res, nil
}

// waitBuilt polls until every chat's tree is built. Every few seconds it
// also runs each unfinished chat's scheduler, as any API call would, so a
// lost queue message cannot stall the run.
func waitBuilt(ctx context.Context, mem *memory.Memory, tenant string, convs []Conversation, poll time.Duration) error {
	pending := map[string]bool{}
	for _, c := range convs {
		pending[c.Chat] = true
	}
	last := map[string]wire.Status{}
	lastPump := time.Now()
	for {
		for chat := range pending {
			st, err := mem.Status(ctx, tenant, chat)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return fmt.Errorf("imagefacts: status of %s: %w", chat, err)
			}
			last[chat] = st
			if st.Entries == ChatEntries && st.Built == st.Nodes {
				delete(pending, chat)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Since(lastPump) > 3*time.Second {
			for chat := range pending {
				if err := mem.Pump(ctx, tenant, chat); err != nil && ctx.Err() == nil {
					return fmt.Errorf("imagefacts: scheduling %s: %w", chat, err)
				}
			}
			lastPump = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("imagefacts: %d chats not built when the run ended (%w): %s", len(pending), ctx.Err(), describePending(pending, last))
		case <-time.After(poll):
		}
	}
}

func describePending(pending map[string]bool, last map[string]wire.Status) string {
	chats := make([]string, 0, len(pending))
	for c := range pending {
		chats = append(chats, c)
	}
	sort.Strings(chats)
	var parts []string
	for _, c := range chats {
		st := last[c]
		part := fmt.Sprintf("%s %d/%d built, %d retrying", c, st.Built, st.Nodes, st.Retrying)
		if st.LastError != "" {
			part += ", last error: " + st.LastError
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// grade reads every node of one chat: the image's leaf, its parent and
// the root are checked for the image's fact, and every node for facts of
// the other images, which the chat never sent.
func grade(ctx context.Context, nodes NodeLines, tenant string, c Conversation, facts []Fact, res *Result) error {
	if c.Fact < 0 || c.Fact >= len(facts) {
		return fmt.Errorf("imagefacts: %s names fact %d of %d", c.Chat, c.Fact, len(facts))
	}
	want := facts[c.Fact].Fact
	graded := [levels]struct {
		l int
		i int64
	}{{0, int64(c.Slot)}, {1, int64(c.Slot / 2)}, {RootLevel, 0}}
	for l := 0; l <= RootLevel; l++ {
		for i := int64(0); i < ChatEntries>>l; i++ {
			line, ok, err := nodes.NodeLine(ctx, tenant, c.Chat, l, i)
			if err != nil {
				return fmt.Errorf("imagefacts: %w", err)
			}
			if !ok {
				return fmt.Errorf("imagefacts: node (%d, %d) of %s is not built", l, i, c.Chat)
			}
			node := fmt.Sprintf("(%d, %d)", l, i)
			for at, g := range graded {
				if g.l != l || g.i != i {
					continue
				}
				if Contains(line, want) {
					res.Found[at]++
				} else {
					res.Misses = append(res.Misses, Miss{Chat: c.Chat, Node: node + " " + levelNames[at], Fact: want, Line: line})
				}
			}
			for k, f := range facts {
				if k != c.Fact && Contains(line, f.Fact) {
					res.Invented++
					res.Misses = append(res.Misses, Miss{Chat: c.Chat, Node: node, Fact: f.Fact, Line: line, Other: true})
				}
			}
		}
	}
	return nil
}
