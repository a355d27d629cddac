package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/durachat/durachat/shared/store"
)

// Decoding is bounded by the bytes a decode allocates, not by pixels: a 389
// KB PNG of 16-bit RGBA declaring 7071x7071 pixels decodes into 400 MB. The
// cost of a decode is read from the image's header before anything is
// decoded (decodeCost), and every decode of the process takes its cost from
// one budget first, so that many requests at once cannot add up past it.
//
// The arithmetic: Go's collector lets the heap grow to about twice what is
// live, so the memory decodes can take is about twice the budget. The
// budget is DefaultDecodeBudget (128 MB), and in Lambda a quarter of the
// function's memory when that is less, which keeps a function within half of
// its memory (a 512 MB function: 128 MB of decodes). One image may take the
// whole budget and no more; a larger one is refused (ErrTooLarge). An image
// that fits waits for the budget at most MaxDecodeWait, then fails with
// ErrBusy, which is an outage (store.ErrUnavailable): a 503 with
// Retry-After.
const (
	// DefaultDecodeBudget is the process's decode budget in bytes.
	DefaultDecodeBudget = 128 << 20
	// MaxDecodeWait is the longest a decode waits for the budget.
	MaxDecodeWait = 10 * time.Second
)

// ErrBusy is a decode that waited MaxDecodeWait for the decode budget in
// vain. It wraps store.ErrUnavailable: the request may be retried as is.
var ErrBusy = fmt.Errorf("images: decode budget in use, retry later: %w", store.ErrUnavailable)

// Budget bounds the memory that decodes hold at once.
type Budget struct {
	size int64
	sem  *semaphore.Weighted
	// Wait is the longest a decode waits for the budget; NewBudget sets
	// MaxDecodeWait.
	Wait time.Duration
}

// NewBudget returns a Budget of size bytes.
func NewBudget(size int64) *Budget {
	return &Budget{size: size, sem: semaphore.NewWeighted(size), Wait: MaxDecodeWait}
}

// Size is the budget in bytes: the most one decode may cost.
func (b *Budget) Size() int64 { return b.size }

// acquire takes n bytes of the budget, waiting at most b.Wait (or
// until ctx is done). The returned func gives them back.
func (b *Budget) acquire(ctx context.Context, n int64) (release func(), err error) {
	if n > b.size {
		return nil, badImage(ErrTooLarge, fmt.Sprintf("decoding takes %d MB, limit %d MB", mb(n), mb(b.size)), nil)
	}
	wctx, cancel := context.WithTimeout(ctx, b.Wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("images: waiting for the decode budget: %w", ctx.Err())
		}
		return nil, ErrBusy
	}
	var once sync.Once
	return func() { once.Do(func() { b.sem.Release(n) }) }, nil
}

func mb(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

var (
	processMu     sync.Mutex
	processBudget *Budget
)

// ProcessBudget is the budget every decode of this process takes from:
// DefaultDecodeBudget, or a quarter of AWS_LAMBDA_FUNCTION_MEMORY_SIZE (set
// by Lambda, in MB) when that is less.
func ProcessBudget() *Budget {
	processMu.Lock()
	defer processMu.Unlock()
	if processBudget == nil {
		processBudget = NewBudget(defaultBudgetSize(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")))
	}
	return processBudget
}

// SetProcessBudget replaces the process's budget, for a server that knows
// its memory better (or a test). Decodes already holding budget give it
// back to the budget they took it from.
func SetProcessBudget(b *Budget) {
	if b == nil {
		panic(errors.New("images: SetProcessBudget(nil)"))
	}
	processMu.Lock()
	defer processMu.Unlock()
	processBudget = b
}

// defaultBudgetSize is DefaultDecodeBudget, or a quarter of a Lambda
// function's memory (in MB) when that is less.
func defaultBudgetSize(lambdaMemoryMB string) int64 {
	size := int64(DefaultDecodeBudget)
	if m, err := strconv.ParseInt(lambdaMemoryMB, 10, 64); err == nil && m > 0 {
		size = min(size, m<<20/4)
	}
	return size
}
