package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Poller emulates an SQS event source mapping: up to MaxConcurrency
// pollers long-poll the queue for batches of BatchSize, invoke the
// function with each as an SQS event, and delete what it processed. With
// ReportBatchItemFailures the function's batchItemFailures stay in the
// queue (an answer naming a message not in the batch fails the whole
// batch, as in Lambda); without it, or when the invocation fails, the
// whole batch stays. What stays comes back when its visibility timeout
// ends (or earlier, when the function changed it), and the queue's
// redrive policy moves it to the dead-letter queue after maxReceiveCount
// receives.
type Poller struct {
	Source   EventSource
	QueueURL string
	QueueARN string
	Function *Function
	Client   *sqs.Client
	Log      *slog.Logger

	// Counters, for fault runs.
	Batches      atomic.Int64 // invocations
	Failed       atomic.Int64 // invocations that failed as a whole
	ItemFailures atomic.Int64 // messages reported in batchItemFailures
	Deleted      atomic.Int64

	// Duplicates, while set, makes the deliveries of a standard queue at
	// their worst: each batch is handed to the function in reverse order,
	// and the first time a message is received a copy of it is sent to the
	// queue, to arrive up to 3 s later among newer messages (or while the
	// original is still being built, to another execution environment).
	Duplicates atomic.Bool
	Duplicated atomic.Int64 // copies sent

	seen sync.Map // message ids received while Duplicates was set, and the copies'
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(p.Source.MaxConcurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.poll(ctx)
		}()
	}
	wg.Wait()
}

func (p *Poller) poll(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(p.QueueURL),
			MaxNumberOfMessages: int32(min(max(p.Source.BatchSize, 1), 10)),
			WaitTimeSeconds:     20,
			//lint:ignore SA1019 both names, as sqsqueue asks: some SQS-protocol servers read only the older one
			AttributeNames:              []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.Log.Warn("event source: receiving", "err", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = time.Second
		if len(out.Messages) == 0 {
			continue
		}
		p.handle(ctx, p.fill(ctx, out.Messages))
	}
}

// fill gathers more messages after the first receive, as Lambda does with
// a batching window: until the batch holds BatchSize or BatchWindow
// seconds have passed, whichever comes first. SQS hands out at most 10 a
// receive and waits in whole seconds, so the window's last fraction of a
// second is polled.
func (p *Poller) fill(ctx context.Context, msgs []sqstypes.Message) []sqstypes.Message {
	deadline := time.Now().Add(time.Duration(p.Source.BatchWindow) * time.Second)
	for len(msgs) < p.Source.BatchSize && ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(p.QueueURL),
			MaxNumberOfMessages: int32(min(p.Source.BatchSize-len(msgs), 10)),
			WaitTimeSeconds:     int32(min(left/time.Second, 20)),
			//lint:ignore SA1019 both names, as the first receive asks
			AttributeNames:              []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			break // what was received goes now; the poll loop reports errors
		}
		if len(out.Messages) == 0 && left < time.Second {
			sleep(ctx, min(left, windowPoll))
		}
		msgs = append(msgs, out.Messages...)
	}
	return msgs
}

// windowPoll is how often fill asks again in a window's last second.
const windowPoll = 100 * time.Millisecond

func (p *Poller) handle(ctx context.Context, msgs []sqstypes.Message) {
	if p.Duplicates.Load() {
		slices.Reverse(msgs)
		p.duplicate(ctx, msgs)
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	byID := map[string]sqstypes.Message{}
	for i, m := range msgs {
		ev.Records[i] = p.record(m)
		byID[aws.ToString(m.MessageId)] = m
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		p.Log.Error("event source: encoding the event", "err", err)
		return
	}
	p.Batches.Add(1)
	out, err := p.Function.Invoke(context.WithoutCancel(ctx), payload)
	if err != nil {
		// The whole batch stays; it comes back after its visibility.
		p.Failed.Add(1)
		p.Log.Warn("event source: invocation failed; the batch stays in the queue", "messages", len(msgs), "err", err)
		return
	}
	keep := map[string]bool{}
	if p.Source.ReportFailures {
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			p.Failed.Add(1)
			p.Log.Warn("event source: the answer is not an SQSEventResponse; the batch stays", "err", err)
			return
		}
		for _, f := range resp.BatchItemFailures {
			if _, ok := byID[f.ItemIdentifier]; !ok {
				p.Failed.Add(1)
				p.Log.Warn("event source: a batch item failure names no message of the batch; the batch stays", "id", f.ItemIdentifier)
				return
			}
			keep[f.ItemIdentifier] = true
		}
		p.ItemFailures.Add(int64(len(keep)))
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for id, m := range byID {
		if !keep[id] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: m.ReceiptHandle})
		}
	}
	// SQS deletes at most 10 messages a request; a batch may hold more.
	for chunk := range slices.Chunk(entries, 10) {
		res, err := p.Client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: chunk})
		if err != nil {
			p.Log.Warn("event source: deleting processed messages", "messages", len(chunk), "err", err)
			continue
		}
		p.Deleted.Add(int64(len(res.Successful)))
		for _, f := range res.Failed {
			p.Log.Warn("event source: deleting a processed message", "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
		}
	}
}

// duplicate sends a copy of each message received for the first time to
// the queue, each delayed by 0 to 3 s. A copy is not copied again (unless
// it is received before its SendMessage has answered), so the copies
// number the messages, not a storm.
func (p *Poller) duplicate(ctx context.Context, msgs []sqstypes.Message) {
	for _, m := range msgs {
		if _, again := p.seen.LoadOrStore(aws.ToString(m.MessageId), true); again {
			continue
		}
		out, err := p.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.QueueURL), MessageBody: m.Body,
			DelaySeconds: rand.Int32N(4), MessageAttributes: m.MessageAttributes})
		if err != nil {
			p.Log.Warn("event source: duplicating a message", "err", err)
			continue
		}
		p.seen.Store(aws.ToString(out.MessageId), true)
		p.Duplicated.Add(1)
	}
}

func (p *Poller) record(m sqstypes.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             m.Attributes,
		EventSource:            "aws:sqs",
		EventSourceARN:         p.QueueARN,
		AWSRegion:              Region,
	}
	if len(m.MessageAttributes) > 0 {
		r.MessageAttributes = map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			r.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType),
			}
		}
	}
	return r
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (p *Poller) String() string {
	return fmt.Sprintf("%s <- %s (batch %d, concurrency %d, report failures %v)", p.Source.Function, p.Source.Queue,
		p.Source.BatchSize, p.Source.MaxConcurrency, p.Source.ReportFailures)
}
