// Package sqsqueue is the SQS adapter of store.Queue and store.Receiver,
// and turns the messages of a Lambda SQS event into store.Delivery.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/durachat/durachat/shared/aws/awsfault"
	"github.com/durachat/durachat/shared/store"
)

// SQS's limits. Arguments outside them are refused, not clipped, as the
// embedded queue does, so that what works on one works on the other.
const (
	MaxMessageSize = 256 << 10        // bytes of a body
	MaxDelay       = 15 * time.Minute // Send's delay (DelaySeconds)
	MaxVisibility  = 12 * time.Hour   // Receive's visibility and Retry's delay
	MaxWait        = 20 * time.Second // Receive's long poll (WaitTimeSeconds)
	MaxReceive     = 10               // messages per Receive

	receiveCount = "ApproximateReceiveCount" // message system attribute
)

// Queue is a store.Queue and store.Receiver on one SQS queue.
type Queue struct {
	client *sqs.Client
	url    string
}

var (
	_ store.Queue    = (*Queue)(nil)
	_ store.Receiver = (*Queue)(nil)
)

// New returns the queue at queueURL.
func New(c *sqs.Client, queueURL string) *Queue {
	return &Queue{client: c, url: queueURL}
}

// seconds rounds d up to whole seconds: SQS counts in seconds, and a delay
// must never be cut short. The limits checked before keep it within int32.
func seconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// Send enqueues body, to be delivered after delay (0 to MaxDelay, rounded
// up to whole seconds). A body over MaxMessageSize is store.ErrTooLarge.
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	switch {
	case len(body) > MaxMessageSize:
		return fmt.Errorf("queue send: body of %d bytes, limit %d: %w", len(body), MaxMessageSize, store.ErrTooLarge)
	case delay < 0 || delay > MaxDelay:
		return fmt.Errorf("queue send: delay %s outside 0-%s", delay, MaxDelay)
	}
	_, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(body),
		DelaySeconds: seconds(delay),
	})
	if err != nil {
		return mapError("send", err)
	}
	return nil
}

// SendBatch enqueues 1 to store.MaxSendBatch bodies, each delivered after
// delay, with SendMessageBatch: one request, or more when the bodies
// together pass SQS's payload limit (MaxMessageSize for the whole batch).
// A body over MaxMessageSize, and an entry SQS refuses, are named in the
// *store.BatchError; the others are sent.
func (q *Queue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return err
	}
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("queue send batch: delay %s outside 0-%s", delay, MaxDelay)
	}
	var be store.BatchError
	fail := func(i int, err error) {
		if be.Err == nil {
			be.Err = err
		}
		be.Failed = append(be.Failed, i)
	}
	var (
		entries []types.SendMessageBatchRequestEntry
		size    int
		settled int // bodies sent or failed so far
	)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			err = mapError("send batch", err)
			if settled == 0 {
				return err // nothing was sent: a plain error
			}
			for _, e := range entries {
				i, _ := strconv.Atoi(aws.ToString(e.Id))
				fail(i, err)
			}
		} else {
			for _, f := range out.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				fail(i, fmt.Errorf("queue send batch: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
		settled += len(entries)
		entries, size = entries[:0], 0
		return nil
	}
	for i, b := range bodies {
		if len(b) > MaxMessageSize {
			fail(i, fmt.Errorf("queue send batch: body of %d bytes, limit %d: %w", len(b), MaxMessageSize, store.ErrTooLarge))
			settled++
			continue
		}
		if size+len(b) > MaxMessageSize {
			if err := flush(); err != nil {
				return err
			}
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id:           aws.String(strconv.Itoa(i)),
			MessageBody:  aws.String(b),
			DelaySeconds: seconds(delay),
		})
		size += len(b)
	}
	if err := flush(); err != nil {
		return err
	}
	if len(be.Failed) > 0 {
		slices.Sort(be.Failed)
		return &be
	}
	return nil
}

// Receive long-polls up to wait (0 to MaxWait) for 1 to MaxReceive
// messages and hides them for visibility (0 to MaxVisibility). Durations
// are rounded up to whole seconds.
func (q *Queue) Receive(ctx context.Context, limit int, visibility, wait time.Duration) ([]store.Delivery, error) {
	switch {
	case limit < 1 || limit > MaxReceive:
		return nil, fmt.Errorf("queue receive: max %d outside 1-%d", limit, MaxReceive)
	case visibility < 0 || visibility > MaxVisibility:
		return nil, fmt.Errorf("queue receive: visibility %s outside 0-%s", visibility, MaxVisibility)
	case wait < 0 || wait > MaxWait:
		return nil, fmt.Errorf("queue receive: wait %s outside 0-%s", wait, MaxWait)
	}
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.url),
		MaxNumberOfMessages: int32(limit),
		VisibilityTimeout:   seconds(visibility),
		WaitTimeSeconds:     seconds(wait),
		// The receive count is asked for both ways: the current name, and
		// the older one some SQS-protocol servers still read.
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		//lint:ignore SA1019 asked for under the older name too, on purpose
		AttributeNames: []types.QueueAttributeName{receiveCount},
	})
	if err != nil {
		return nil, mapError("receive", err)
	}
	ds := make([]store.Delivery, 0, len(out.Messages))
	for _, m := range out.Messages {
		ds = append(ds, store.Delivery{
			ID:       aws.ToString(m.MessageId),
			Body:     aws.ToString(m.Body),
			Receipt:  aws.ToString(m.ReceiptHandle),
			Receives: count(m.Attributes[receiveCount]),
		})
	}
	return ds, nil
}

// Ack deletes the delivered message.
func (q *Queue) Ack(ctx context.Context, receipt string) error {
	_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl:      aws.String(q.url),
		ReceiptHandle: aws.String(receipt),
	})
	if err != nil {
		return mapError("ack", err)
	}
	return nil
}

// Retry makes the delivered message visible again after delay (0 to
// MaxVisibility, rounded up to whole seconds).
func (q *Queue) Retry(ctx context.Context, receipt string, delay time.Duration) error {
	if delay < 0 || delay > MaxVisibility {
		return fmt.Errorf("queue retry: delay %s outside 0-%s", delay, MaxVisibility)
	}
	_, err := q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(q.url),
		ReceiptHandle:     aws.String(receipt),
		VisibilityTimeout: seconds(delay),
	})
	if err != nil {
		return mapError("retry", err)
	}
	return nil
}

// Delivery is the store.Delivery of a message that Lambda received from
// SQS on the function's behalf.
func Delivery(m events.SQSMessage) store.Delivery {
	return store.Delivery{
		ID:       m.MessageId,
		Body:     m.Body,
		Receipt:  m.ReceiptHandle,
		Receives: count(m.Attributes[receiveCount]),
	}
}

// count reads a receive count; a missing one counts as the first receive.
func count(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// mapError turns an SQS error into store.ErrUnavailable for outages, and
// wraps the rest.
func mapError(op string, err error) error {
	op = "queue " + op
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "KmsThrottled" {
		return store.Unavailable(op, err)
	}
	if awsfault.Transient(err) {
		return store.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
