package stack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/durachat/durachat/shared/aws/awstest"
)

// The batching window, as Lambda runs it: the batch goes when it holds
// BatchSize messages or when the window has passed, whichever is first.
func TestTheBatchingWindowGathersMessagesUntilTheBatchIsFullOrTheWindowEnds(t *testing.T) {
	q := awstest.StartSQS(t)
	ctx := context.Background()
	send := func(url string, n int) {
		for i := range n {
			if _, err := q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := func(url string) []sqstypes.Message {
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("the first receive: %v %v", out, err)
		}
		return out.Messages
	}
	poller := func(url string, size, window int) *Poller {
		return &Poller{Source: EventSource{BatchSize: size, BatchWindow: window}, QueueURL: url, Client: q.Client,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}

	t.Run("AFullBatchGoesBeforeTheWindowEnds", func(t *testing.T) {
		url := q.CreateQueue(t)
		send(url, 25)
		began := time.Now()
		got := poller(url, 20, 10).fill(ctx, first(url))
		if len(got) != 20 {
			t.Fatalf("the batch holds %d messages, want 20", len(got))
		}
		if d := time.Since(began); d >= 10*time.Second {
			t.Fatalf("a full batch waited %s, the whole window", d)
		}
	})
	t.Run("APartialBatchWaitsOutTheWindowAndTakesWhatArrivesInIt", func(t *testing.T) {
		url := q.CreateQueue(t)
		send(url, 1)
		began := time.Now()
		msgs := first(url)
		go func() {
			time.Sleep(300 * time.Millisecond)
			send(url, 1)
		}()
		// The window is long beside the send 300 ms into it, so that a
		// slow send still lands inside it.
		const window = 5
		got := poller(url, 20, window).fill(ctx, msgs)
		if d := time.Since(began); d < window*time.Second {
			t.Errorf("the batch went after %s, before its %d s window", d, window)
		}
		if len(got) != 2 {
			t.Errorf("the batch holds %d messages, want the 2 sent within its window", len(got))
		}
	})
}
