package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// Retrier makes a received message visible again after a delay: SQS's
// ChangeMessageVisibility. store.Receiver has it.
type Retrier interface {
	Retry(ctx context.Context, receipt string, delay time.Duration) error
}

// DefaultBatchBuilds is how many builds of one batch run at once unless
// Config.BatchBuilds says otherwise: the template's default batch size,
// so that a full batch takes one model call's time.
const DefaultBatchBuilds = 20

// deadlineMargin is the time a batch keeps after its builds stop, before
// the function's deadline (a quarter of the time left, when that is less).
const deadlineMargin = 10 * time.Second

// receiveWait is how long Worker waits for messages in one receive.
const receiveWait = 2 * time.Second

// A source yields build messages to consume and settles each one after its
// build: ack when it is done with, retry when it must come back after
// delay. receive returns errDrained when it has nothing more to yield.
type source interface {
	receive(ctx context.Context, max int) ([]store.Delivery, error)
	ack(ctx context.Context, d store.Delivery) error
	retry(ctx context.Context, d store.Delivery, delay time.Duration) error
}

// errDrained: a batch has handed out all its deliveries.
var errDrained = errors.New("memory: batch drained")

// HandleBatch is the compaction function: it builds the node of each
// delivery of a batch the platform received on the program's behalf (the
// Lambda SQS event source), at most Config.BatchBuilds at once, and returns
// the IDs of the deliveries to leave on the queue (partial batch
// failures); the platform deletes the others. A build that must come back
// (failed, or not due yet) is made visible again after its delay through
// Config.Retrier and reported; without a Retrier, a delayed copy is sent
// to the queue instead and the original acknowledged.
func (m *Memory) HandleBatch(ctx context.Context, ds []store.Delivery) (retry []string) {
	b := &batch{m: m, pending: ds}
	m.consume(ctx, b, m.batchBuilds)
	b.mu.Lock()
	defer b.mu.Unlock()
	// Deliveries the deadline left unstarted come back too.
	for _, d := range b.pending {
		b.failed = append(b.failed, d.ID)
	}
	return b.failed
}

// Worker consumes build messages in-process (durachat serve) until ctx
// ends: received messages are built concurrently, at most the configured
// number at once over all chats; each chat holds itself to MaxInFlight.
func (m *Memory) Worker(ctx context.Context, recv store.Receiver) error {
	m.consume(ctx, receiver{recv: recv, visibility: m.claimLease}, m.workers)
	return nil
}

// consume builds the messages src yields, at most n at once, until src is
// drained or ctx ends, and settles each. A build and its settling finish
// even when ctx is cancelled (a worker told to stop): the claim is released
// and the node recorded rather than left to lapse. When ctx has a deadline
// (a Lambda invocation), builds stop a little before it, so each one still
// records its outcome and asks for its message again.
func (m *Memory) consume(ctx context.Context, src source, n int) {
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
		// every builder is busy.
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
			m.logger.WarnContext(ctx, "memory: receiving build messages", "err", err)
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
				m.deliver(ctx, bctx, sctx, src, d)
			}(d)
		}
	}
}

// deliver builds one message under bctx and acknowledges or delays it
// under sctx. A malformed message has nothing to build; retrying cannot
// help, so it is dropped.
func (m *Memory) deliver(ctx, bctx, sctx context.Context, src source, d store.Delivery) {
	handled, err := false, error(nil)
	if m.tasks != nil {
		handled, err = m.tasks.Task(bctx, d.Body)
	}
	msg, perr := parseMessage(d.Body)
	switch {
	case handled:
	case perr == nil:
		err = m.buildOne(bctx, msg)
	default:
		m.logger.ErrorContext(ctx, "memory: dropping a malformed build message", "messageId", d.ID, "err", perr)
	}
	if err == nil {
		if aerr := src.ack(sctx, d); aerr != nil {
			m.logger.WarnContext(ctx, "memory: acknowledging a build message", "messageId", d.ID, "err", aerr)
		}
		return
	}
	if handled {
		// A build logs its own outcome; a task (a deletion's step, a
		// sweep's) leaves no other trace of its failure.
		m.logger.WarnContext(ctx, "memory: a queue task failed; its message comes back", "messageId", d.ID, "err", err)
	}
	if rerr := src.retry(sctx, d, retryDelay(err, m.retry)); rerr != nil {
		m.logger.WarnContext(ctx, "memory: delaying a build message", "messageId", d.ID, "err", rerr)
	}
}

// buildOne builds the node of one message. A panic becomes an error that
// asks for the message again, so one bad build never fails a whole batch
// or stops the worker; its claim lapses with its lease.
func (m *Memory) buildOne(ctx context.Context, msg buildMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			node := Node{L: msg.L, I: msg.I}.Label()
			m.logger.ErrorContext(ctx, "memory: build panicked", "chat", msg.Chat, "node", node, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = &RetryError{After: m.retry, Err: fmt.Errorf("build of node %s of %s panicked: %v", node, msg.Chat, p)}
		}
	}()
	// A message of a deleted incarnation (delivered late, or again) builds
	// nothing: the chat its id names now is another one. build finds that
	// out from the incarnation's state, which went with it, before it
	// claims anything (no read of the identity of its own).
	return m.build(ctx, msg.chat(), msg.L, msg.I)
}

// retryDelay is when a message whose build returned err should come back.
func retryDelay(err error, def time.Duration) time.Duration {
	var re *RetryError
	if errors.As(err, &re) && re.After > 0 {
		return re.After
	}
	return def
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
	m       *Memory
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
	if b.m.retrier != nil {
		b.keep(d)
		return b.m.retrier.Retry(ctx, d.Receipt, delay)
	}
	if err := b.m.queue.Send(ctx, d.Body, delay); err != nil {
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
