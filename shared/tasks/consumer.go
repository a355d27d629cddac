package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// Retrier makes a received message visible again after a delay: SQS's
// ChangeMessageVisibility. store.Receiver has it.
type Retrier interface {
	Retry(ctx context.Context, receipt string, delay time.Duration) error
}

// Defaults of Config.
const (
	// DefaultBatch is how many tasks of one batch run at once: the
	// template's batch size, so that a full batch of builds takes one
	// model call's time.
	DefaultBatch = 20
	// DefaultWorkers bounds the tasks Worker runs at once.
	DefaultWorkers = 32
	// DefaultRetry is the delay of a failed task whose error names none.
	DefaultRetry = 10 * time.Second
	// DefaultVisibility is how long Worker hides a message it received.
	DefaultVisibility = 3 * time.Minute
)

// deadlineMargin is the time a batch keeps after its tasks stop, before
// the function's deadline (a quarter of the time left, when that is less).
const deadlineMargin = 10 * time.Second

// receiveWait is how long Worker waits for messages in one receive.
const receiveWait = 2 * time.Second

// Config wires a Consumer. Router and Queue are required; every other
// field's zero value is its default.
type Config struct {
	Router *Router
	// Queue receives a delayed copy of a failed message of a batch when
	// there is no Retrier.
	Queue store.Queue
	// Retrier, for HandleBatch, delays a failed message in place (SQS
	// ChangeMessageVisibility; the SQS adapter's Retry).
	Retrier Retrier
	// Retry is the delay of a failed task whose error names none
	// (DefaultRetry).
	Retry time.Duration
	// Batch bounds the tasks HandleBatch runs at once from one batch
	// (DefaultBatch); Workers those Worker runs at once (DefaultWorkers).
	Batch, Workers int
	// Visibility is how long Worker hides a message it received: at least
	// the longest task (a build's claim lease; DefaultVisibility).
	Visibility time.Duration
	// Logger receives a record per dropped message and per failed task
	// that logs none itself (slog.Default when nil).
	Logger *slog.Logger
}

// Consumer runs the tasks of the messages a queue delivers, each by the
// router's handler of its kind, and settles each by the outcome.
type Consumer struct {
	cfg Config
}

// NewConsumer returns the consumer of cfg.
func NewConsumer(cfg Config) *Consumer {
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Visibility <= 0 {
		cfg.Visibility = DefaultVisibility
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Consumer{cfg: cfg}
}

// A source yields messages to consume and settles each one after its
// task: ack when it is done with, retry when it must come back after
// delay. receive returns errDrained when it has nothing more to yield.
type source interface {
	receive(ctx context.Context, max int) ([]store.Delivery, error)
	ack(ctx context.Context, d store.Delivery) error
	retry(ctx context.Context, d store.Delivery, delay time.Duration) error
}

// errDrained: a batch has handed out all its deliveries.
var errDrained = errors.New("tasks: batch drained")

// HandleBatch runs the task of each delivery of a batch the platform
// received on the program's behalf (the Lambda SQS event source), at most
// Config.Batch at once, and returns the IDs of the deliveries to leave on
// the queue (partial batch failures); the platform deletes the others. A
// task that must come back (failed, or not due yet) is made visible again
// after its delay through Config.Retrier and reported; without a Retrier,
// a delayed copy is sent to the queue instead and the original
// acknowledged.
func (c *Consumer) HandleBatch(ctx context.Context, ds []store.Delivery) (retry []string) {
	b := &batch{c: c, pending: ds}
	c.consume(ctx, b, c.cfg.Batch)
	b.mu.Lock()
	defer b.mu.Unlock()
	// Deliveries the deadline left unstarted come back too.
	for _, d := range b.pending {
		b.failed = append(b.failed, d.ID)
	}
	return b.failed
}

// Worker consumes the queue in-process (durachat serve) until ctx ends:
// received messages run concurrently, at most Config.Workers at once.
func (c *Consumer) Worker(ctx context.Context, recv store.Receiver) error {
	c.consume(ctx, receiver{recv: recv, visibility: c.cfg.Visibility}, c.cfg.Workers)
	return nil
}

// consume runs the tasks src yields, at most n at once, until src is
// drained or ctx ends, and settles each. A task and its settling finish
// even when ctx is cancelled (a worker told to stop): a build's claim is
// released and its node recorded rather than left to lapse. When ctx has
// a deadline (a Lambda invocation), tasks stop a little before it, so
// each one still records its outcome and asks for its message again.
func (c *Consumer) consume(ctx context.Context, src source, n int) {
	sctx := context.WithoutCancel(ctx)
	bctx := sctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(sctx, d)
		defer cancel()
		bctx, cancel = context.WithDeadline(sctx, d.Add(-min(deadlineMargin, time.Until(d)/4)))
		defer cancel()
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Take a slot before receiving, so no message waits hidden while
		// every runner is busy.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	fill:
		for free < min(10, n) {
			select {
			case sem <- struct{}{}:
				free++
			default:
				break fill
			}
		}
		got, err := src.receive(ctx, free)
		for k := len(got); k < free; k++ {
			<-sem
		}
		if errors.Is(err, errDrained) {
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.cfg.Logger.WarnContext(ctx, "tasks: receiving queue messages", "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		for _, d := range got {
			wg.Add(1)
			go func(d store.Delivery) {
				defer wg.Done()
				defer func() { <-sem }()
				c.deliver(ctx, bctx, sctx, src, d)
			}(d)
		}
	}
}

// deliver runs the task of one message under bctx and acknowledges or
// delays it under sctx. A malformed message has nothing to run; retrying
// cannot help, so it is dropped.
func (c *Consumer) deliver(ctx, bctx, sctx context.Context, src source, d store.Delivery) {
	log := c.cfg.Logger
	m, err := c.cfg.Router.Route(bctx, d.Body)
	if errors.Is(err, ErrMalformed) {
		log.ErrorContext(ctx, "tasks: dropping a malformed queue message", "messageId", d.ID, "kind", string(m.Kind), "err", err)
		err = nil
	}
	if err == nil {
		if aerr := src.ack(sctx, d); aerr != nil {
			log.WarnContext(ctx, "tasks: acknowledging a queue message", "messageId", d.ID, "err", aerr)
		}
		return
	}
	if !errors.As(err, new(logged)) {
		log.WarnContext(ctx, "tasks: a queue task failed; its message comes back", "messageId", d.ID, "kind", string(m.Kind), "err", err)
	}
	if rerr := src.retry(sctx, d, c.retryDelay(err)); rerr != nil {
		log.WarnContext(ctx, "tasks: delaying a queue message", "messageId", d.ID, "err", rerr)
	}
}

// retryDelay is when a message whose task returned err should come back.
func (c *Consumer) retryDelay(err error) time.Duration {
	var rd RetryDelay
	if errors.As(err, &rd) && rd.RetryDelay() > 0 {
		return rd.RetryDelay()
	}
	return c.cfg.Retry
}

// receiver is the source Worker consumes: the queue's consuming side.
type receiver struct {
	recv       store.Receiver
	visibility time.Duration
}

func (r receiver) receive(ctx context.Context, max int) ([]store.Delivery, error) {
	return r.recv.Receive(ctx, max, r.visibility, receiveWait)
}

func (r receiver) ack(ctx context.Context, d store.Delivery) error {
	return r.recv.Ack(ctx, d.Receipt)
}

func (r receiver) retry(ctx context.Context, d store.Delivery, delay time.Duration) error {
	return r.recv.Retry(ctx, d.Receipt, delay)
}

// batch is the source HandleBatch consumes: deliveries the platform
// received, which it deletes unless they are reported as failed.
type batch struct {
	c       *Consumer
	mu      sync.Mutex
	pending []store.Delivery
	failed  []string
}

func (b *batch) receive(_ context.Context, max int) ([]store.Delivery, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil, errDrained
	}
	n := min(max, len(b.pending))
	got := b.pending[:n:n]
	b.pending = b.pending[n:]
	return got, nil
}

// ack has nothing to do: the platform deletes every delivery not reported.
func (b *batch) ack(context.Context, store.Delivery) error { return nil }

func (b *batch) retry(ctx context.Context, d store.Delivery, delay time.Duration) error {
	if b.c.cfg.Retrier != nil {
		b.keep(d)
		return b.c.cfg.Retrier.Retry(ctx, d.Receipt, delay)
	}
	if err := b.c.cfg.Queue.Send(ctx, d.Body, delay); err != nil {
		b.keep(d) // SQS brings it back after its visibility timeout
		return fmt.Errorf("requeueing: %w", err)
	}
	return nil
}

// keep reports d as failed, so the platform leaves it on the queue.
func (b *batch) keep(d store.Delivery) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed = append(b.failed, d.ID)
}
