package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/store"
)

// Retrier makes a received message visible again after a delay: SQS's
// ChangeMessageVisibility. store.Receiver has it.
type Retrier interface {
	Retry(ctx context.Context, receipt string, delay time.Duration) error
}

// batchConcurrency bounds the builds one SQS batch runs at once.
const batchConcurrency = 8

// HandleSQS is the compaction function: it builds the node of each
// message. A build that must come back (failed, or not due yet) is made
// visible again after its delay through Config.Retrier and reported in
// BatchItemFailures; without a Retrier, a delayed copy is sent to the
// queue instead and the original acknowledged. It never fails the whole
// batch: the error is always nil.
func (m *Memory) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	retrier := m.retrier
	// Builds stop a little before the function's deadline, so each one
	// still records its outcome and asks for its message again.
	bctx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		bctx, cancel = context.WithDeadline(ctx, d.Add(-min(deadlineMargin, time.Until(d)/4)))
		defer cancel()
	}
	var (
		mu   sync.Mutex
		resp events.SQSEventResponse
		wg   sync.WaitGroup
		sem  = make(chan struct{}, batchConcurrency)
	)
	for _, rec := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func(rec events.SQSMessage) {
			defer wg.Done()
			defer func() { <-sem }()
			if !m.handleRecord(ctx, bctx, rec, retrier) {
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				mu.Unlock()
			}
		}(rec)
	}
	wg.Wait()
	return resp, nil
}

// deadlineMargin is the time a batch keeps after its builds stop, before
// the function's deadline (a quarter of the time left, when that is less).
const deadlineMargin = 10 * time.Second

// handleRecord builds one message (under bctx); false asks SQS to keep
// the message.
func (m *Memory) handleRecord(ctx, bctx context.Context, rec events.SQSMessage, retrier Retrier) bool {
	msg, err := parseMessage(rec.Body)
	if err != nil {
		// Nothing to build; retrying cannot help.
		m.logger.ErrorContext(ctx, "memory: dropping a malformed build message", "messageId", rec.MessageId, "err", err)
		return true
	}
	err = m.buildOne(bctx, msg)
	if err == nil {
		return true
	}
	delay := retryDelay(err, m.retry)
	if retrier != nil {
		if rerr := retrier.Retry(ctx, rec.ReceiptHandle, delay); rerr != nil {
			m.logger.WarnContext(ctx, "memory: delaying a build message", "messageId", rec.MessageId, "err", rerr)
		}
		return false
	}
	if serr := m.queue.Send(ctx, rec.Body, delay); serr != nil {
		m.logger.WarnContext(ctx, "memory: requeueing a build message", "messageId", rec.MessageId, "err", serr)
		return false // SQS brings it back after its visibility timeout
	}
	return true
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
	return m.Build(ctx, msg.Tenant, msg.Chat, msg.L, msg.I)
}

// retryDelay is when a message whose build returned err should come back.
func retryDelay(err error, def time.Duration) time.Duration {
	var re *RetryError
	if errors.As(err, &re) && re.After > 0 {
		return re.After
	}
	return def
}

// Worker consumes build messages in-process (durachat serve) until ctx
// ends: received messages are built concurrently, at most the configured
// number at once over all chats; each chat holds itself to MaxInFlight.
func (m *Memory) Worker(ctx context.Context, recv store.Receiver) error {
	sem := make(chan struct{}, m.workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Take a slot before receiving, so no message waits hidden while
		// every worker is busy.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1
	fill:
		for free < min(10, m.workers) {
			select {
			case sem <- struct{}{}:
				free++
			default:
				break fill
			}
		}
		got, err := recv.Receive(ctx, free, m.lease, 2*time.Second)
		for k := len(got); k < free; k++ {
			<-sem
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.logger.WarnContext(ctx, "memory: receiving build messages", "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
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
				m.deliver(ctx, recv, d)
			}(d)
		}
	}
	return nil
}

// deliver builds one received message and acknowledges or delays it.
func (m *Memory) deliver(ctx context.Context, recv store.Receiver, d store.Delivery) {
	// Finish the build even when the worker is told to stop: the claim is
	// released and the node recorded rather than left to lapse.
	bctx := context.WithoutCancel(ctx)
	msg, err := parseMessage(d.Body)
	if err == nil {
		err = m.buildOne(bctx, msg)
	} else {
		m.logger.ErrorContext(ctx, "memory: dropping a malformed build message", "messageId", d.ID, "err", err)
		err = nil
	}
	if err == nil {
		if aerr := recv.Ack(bctx, d.Receipt); aerr != nil {
			m.logger.WarnContext(ctx, "memory: acknowledging a build message", "messageId", d.ID, "err", aerr)
		}
		return
	}
	if rerr := recv.Retry(bctx, d.Receipt, retryDelay(err, m.retry)); rerr != nil {
		m.logger.WarnContext(ctx, "memory: delaying a build message", "messageId", d.ID, "err", rerr)
	}
}
