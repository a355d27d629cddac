package cost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"sync"
	"testing"
	"time"

	_ "golang.org/x/image/webp"

	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// countingBlobs counts S3 requests: PUTs, and GETs and HEADs (priced alike).
type countingBlobs struct {
	store.Blobs
	mu         sync.Mutex
	puts, gets int
}

func (c *countingBlobs) Put(ctx context.Context, key string, b store.Blob) error {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Blobs.Put(ctx, key, b)
}

func (c *countingBlobs) Get(ctx context.Context, key string) (store.Blob, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Blobs.Get(ctx, key)
}

func (c *countingBlobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Blobs.Head(ctx, key)
}

// batchQueue keeps sent build messages; drain hands them to HandleSQS in
// batches of 10, as the compact function's event source does.
type batchQueue struct {
	clock   *clock
	mu      sync.Mutex
	pending []queued
	sent    int
}

type queued struct {
	body string
	due  time.Time
}

func (q *batchQueue) Send(_ context.Context, body string, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent++
	q.pending = append(q.pending, queued{body: body, due: q.clock.Now().Add(delay)})
	return nil
}

// SendBatch keeps each body as Send does; the cost still counts SQS
// requests per message, an upper bound.
func (q *batchQueue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return err
	}
	for _, b := range bodies {
		if err := q.Send(ctx, b, delay); err != nil {
			return err
		}
	}
	return nil
}

func (q *batchQueue) drain(t *testing.T, ctx context.Context, m *memory.Memory) {
	t.Helper()
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatal("the builds never settle")
		}
		q.mu.Lock()
		batch := q.pending[:min(10, len(q.pending))]
		q.pending = q.pending[len(batch):]
		q.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		var ds []store.Delivery
		delayed := false
		for k, b := range batch {
			if b.due.After(q.clock.Now()) {
				delayed = true
			}
			ds = append(ds, store.Delivery{ID: fmt.Sprint(round, "-", k), Body: b.body, Receives: 1})
		}
		if delayed {
			q.clock.Add(memory.DefaultRetry)
		}
		// A failed build queues its own retry (through q), so the IDs to
		// deliver again are not needed here.
		tasks.NewConsumer(tasks.Config{
			Router: tasks.NewRouter(map[tasks.Kind]tasks.Handler{tasks.Build: m.BuildTask}), Queue: q,
		}).HandleBatch(ctx, ds)
	}
}

// clock is the chat's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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

// tokens estimates a text's tokens: 4 bytes a token.
func tokens(bytes int) int { return (bytes + 3) / 4 }

// cacheTTL is how long a cached prefix lives after its last use.
const cacheTTL = 5 * time.Minute

// lookback is how many block boundaries before a cache point Claude on
// Bedrock also finds a cached prefix at.
const lookback = 20

// promptCache bills Converse requests as Bedrock does for Claude with
// prompt caching: a cache point caches the prompt up to it when that
// prefix, and the part since the previous cache point, hold at least min
// tokens; a request reads the longest cached prefix that ends at one of
// its cache points or at one of the lookback block boundaries before one;
// it writes from there to its last cache point; the rest is uncached
// input. Cached prefixes expire cacheTTL after their last use.
type promptCache struct {
	min                        int
	entries                    map[[32]byte]time.Time
	input, read, write, output int
}

func newPromptCache(min int) *promptCache {
	return &promptCache{min: min, entries: map[[32]byte]time.Time{}}
}

type boundary struct {
	tokens int
	key    [32]byte
	point  bool
}

func (p *promptCache) bill(req bedrocktest.Request, now time.Time) {
	h := sha256.New()
	var bs []boundary
	total := 0
	block := func(kind string, payload []byte, tok int) {
		writeField(h, kind, payload)
		total += tok
		var key [32]byte
		copy(key[:], h.Sum(nil))
		bs = append(bs, boundary{tokens: total, key: key})
	}
	walk := func(blocks []bedrocktest.Block) {
		for _, b := range blocks {
			switch {
			case b.CachePoint != nil:
				if len(bs) > 0 {
					bs[len(bs)-1].point = true
				}
			case b.Text != nil:
				block("text", []byte(*b.Text), tokens(len(*b.Text)))
			case b.Image != nil:
				block("image", b.Image.Source.Bytes, imageTokens(b.Image.Source.Bytes))
			}
		}
	}
	walk(req.System)
	for _, m := range req.Messages {
		writeField(h, "role", []byte(m.Role))
		walk(m.Content)
	}
	read, hit := 0, -1
	last, prev := -1, 0
	for j, b := range bs {
		if !b.point {
			continue
		}
		for k := j; k >= 0 && k >= j-lookback; k-- {
			if exp, ok := p.entries[bs[k].key]; ok && now.Before(exp) && bs[k].tokens > read {
				read, hit = bs[k].tokens, k
			}
		}
		if b.tokens >= p.min && b.tokens-prev >= p.min {
			last, prev = j, b.tokens
			p.entries[b.key] = now.Add(cacheTTL)
		}
	}
	if hit >= 0 {
		p.entries[bs[hit].key] = now.Add(cacheTTL)
	}
	write := 0
	if last >= 0 && bs[last].tokens > read {
		write = bs[last].tokens - read
	}
	p.read += read
	p.write += write
	p.input += total - read - write
}

func writeField(h hash.Hash, kind string, payload []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write([]byte(kind))
	h.Write(n[:])
	h.Write(payload)
}

// imageTokens is Claude's estimate for an image: width x height / 750.
func imageTokens(data []byte) int {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		panic(errors.Join(errors.New("an image the model could not read"), err))
	}
	return cfg.Width * cfg.Height / 750
}
