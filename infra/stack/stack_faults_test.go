//go:build unix

package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/aws/awslocal"
)

// FaultRunsEnv turns on the fault runs (make stack-faults): each takes
// minutes, as the system's own recovery does (a killed build's claim
// lapses after its 3 minute lease).
const FaultRunsEnv = "DURACHAT_FAULT_RUNS"

// faultRun is one run: a workload of appends from concurrent writers to
// one chat, a fault injected while it runs, and the wait until the chat's
// tree is complete again.
type faultRun struct {
	name string
	// inject starts the fault; ref is the run's stored image, when it
	// has one.
	inject  func(t *testing.T, s *stack.Stack, ref string) (clear func())
	hold    time.Duration // how long the fault stays
	writers int
	each    int
	// image, when set, makes every message name an image stored before
	// the fault, so that its leaf's build reads it from S3.
	image bool
	// after, when set, checks what the fault left once the chat has
	// converged.
	after func(t *testing.T, s *stack.Stack)
}

// faultReport is what the docs record of a run.
type faultReport struct {
	accepted, logged, lost int64
	refused                int64 // answers the writers retried (503, 500)
	batchFailures          int64 // invocations of the compact function that failed as a whole
	itemRetries            int64 // messages the compact function asked back
	injected               int64 // requests answered by the fault
	converge               time.Duration
}

func TestFaultRunsOnTheDeployedShape(t *testing.T) {
	if os.Getenv(FaultRunsEnv) == "" {
		t.Skipf("set %s=1 (make stack-faults) to run the fault runs", FaultRunsEnv)
	}
	// A killed invocation's batch comes back after the queue's visibility:
	// 720 s in the template, 20 s here so that the run converges in minutes.
	s := startStack(t, stack.Options{Visibility: 20 * time.Second, TableFaults: true})
	compact := s.Functions["CompactFunction"]
	poison := &poisonRun{}
	runs := []faultRun{
		{
			name: "TheCompactFunctionKilledMidBatchLosesNothing",
			inject: func(_ *testing.T, s *stack.Stack, _ string) func() {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case <-stop:
							return
						case <-time.After(2 * time.Second):
							if compact.Busy() > 0 {
								compact.Kill()
							}
						}
					}
				}()
				return func() { close(stop); <-done }
			},
			hold: 20 * time.Second, writers: 4, each: 50,
		},
		{
			name: "S3UnavailableFor30SecondsLosesNothing",
			inject: func(_ *testing.T, s *stack.Stack, _ string) func() {
				s.S3.Faults.Set(stack.Always(s3Down))
				return s.S3.Faults.Clear
			},
			hold: 30 * time.Second, writers: 4, each: 50, image: true,
		},
		{
			name: "DynamoDBThrottlingLosesNothing",
			inject: func(_ *testing.T, s *stack.Stack, _ string) func() {
				s.DynamoDB.Faults.Set(stack.Sometimes(0.3, awslocal.DynamoDBError(http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")))
				return s.DynamoDB.Faults.Clear
			},
			hold: 30 * time.Second, writers: 8, each: 25,
		},
		{
			name: "DuplicateAndOutOfOrderDeliveriesLoseNothing",
			inject: func(t *testing.T, s *stack.Stack, _ string) func() {
				p := s.Pollers[0]
				p.Duplicated.Store(0)
				p.Duplicates.Store(true)
				return func() {
					p.Duplicates.Store(false)
					t.Logf("%d build messages delivered twice, every batch in reverse order", p.Duplicated.Load())
				}
			},
			hold: 30 * time.Second, writers: 4, each: 50,
		},
		{
			name:   "APoisonBuildMessageReachesTheDeadLetterQueue",
			inject: poison.inject,
			after:  poison.after,
			hold:   30 * time.Second, writers: 4, each: 50,
		},
		{
			name:   "ARestoreWhileS3IsDownKeepsRefsAsText",
			inject: restoreDuringS3Outage,
			hold:   30 * time.Second, writers: 4, each: 50, image: true,
		},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			r := runFault(t, s, run)
			t.Logf("| %s | %d | %d | %d | %d | %d | %d | %d | %s |", run.name, r.injected, r.accepted, r.lost, r.refused,
				r.batchFailures, r.itemRetries, r.logged, r.converge.Round(time.Second))
			if r.lost != 0 {
				t.Fatalf("%d accepted messages are not in the log", r.lost)
			}
		})
	}
}

func runFault(t *testing.T, s *stack.Stack, run faultRun) faultReport {
	chat := strings.ToLower(run.name)
	if len(chat) > 100 {
		chat = chat[:100]
	}
	poller := s.Pollers[0]
	batchesBefore, itemsBefore := poller.Failed.Load(), poller.ItemFailures.Load()
	var rep faultReport
	var wg sync.WaitGroup
	host := api{t: t, base: s.URL, token: s.DevToken}
	var ref string
	if run.image {
		var after struct{ Stored []string }
		host.ok(http.MethodPost, "/v1/chats/"+chat+"/hooks/after-tool", map[string]any{
			"call":   map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []any{map[string]any{"type": "image", "data": pngBase64(t, 99), "mimeType": "image/png"}}},
		}, &after)
		ref = "[image " + after.Stored[0] + "]"
	}
	var accepted, refused, entries atomic.Int64
	errs := make(chan error, run.writers)
	for w := range run.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range run.each {
				text := fmt.Sprintf("writer %d message %d of %s: %s", w, i, run.name, strings.Repeat("fault ", 30))
				if ref != "" {
					text += " Compare with " + ref + "."
				}
				body, _ := json.Marshal(map[string]any{"receipt": fmt.Sprintf("w%d-%d", w, i),
					"messages": []any{map[string]any{"role": "user", "content": text}}})
				n, ids, err := appendUntil(s.URL+"/v1/chats/"+chat+"/messages", s.DevToken, body, time.Now().Add(3*time.Minute))
				entries.Add(int64(ids))
				refused.Add(int64(n))
				if err != nil {
					errs <- fmt.Errorf("writer %d message %d: %w", w, i, err)
					return
				}
				accepted.Add(1)
				// Paced to last through the fault.
				time.Sleep(run.hold / time.Duration(run.each))
			}
		}()
	}
	time.Sleep(2 * time.Second)
	for _, b := range []*stack.Backend{s.S3, s.DynamoDB, s.SQS} {
		b.Faults.Injected.Store(0)
	}
	clear := run.inject(t, s, ref)
	time.Sleep(run.hold)
	clear()
	cleared := time.Now()
	for _, b := range []*stack.Backend{s.S3, s.DynamoDB, s.SQS} {
		rep.injected += b.Faults.Injected.Load()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rep.accepted, rep.refused = accepted.Load(), refused.Load()
	want := entries.Load()

	// Converged: every accepted message logged once, every node built.
	deadline := time.Now().Add(6 * time.Minute)
	for {
		var st struct {
			Entries int64 `json:"entries"`
			Unbuilt int64 `json:"unbuilt"`
			Stalled bool  `json:"stalled"`
		}
		host.ok(http.MethodGet, "/v1/chats/"+chat+"/status", nil, &st)
		rep.logged = st.Entries
		if st.Entries >= want && st.Unbuilt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged 6 minutes after the fault: %+v", st)
		}
		time.Sleep(time.Second)
	}
	rep.converge = time.Since(cleared)
	rep.lost = want - rep.logged
	if rep.lost < 0 {
		t.Errorf("the log holds %d entries, the accepted appends were given %d: some were logged twice", rep.logged, want)
	}
	rep.batchFailures = poller.Failed.Load() - batchesBefore
	rep.itemRetries = poller.ItemFailures.Load() - itemsBefore
	// The tree is complete: the view covers every entry.
	host.built(chat, rep.logged, time.Minute)
	if run.after != nil {
		run.after(t, s)
	}
	return rep
}

// appendUntil posts an append until it is accepted or the deadline
// passes, retrying what a host retries (503 with Retry-After, 500 from the
// gateway, a failed connection); it returns how many answers it retried
// and how many entries the accepted append was given.
func appendUntil(url, token string, body []byte, deadline time.Time) (retried, entries int, err error) {
	return retryAppend(func() (int, []byte, time.Duration, error) { return post(url, token, body) }, deadline)
}

// retryAppend sends an append with send until it is accepted, retrying the
// answers a host retries (503, 500, 429) at their Retry-After, at least
// 200 ms and at most 2 s apart, until deadline.
func retryAppend(send func() (int, []byte, time.Duration, error), deadline time.Time) (retried, entries int, err error) {
	for {
		status, raw, retryAfter, err := send()
		switch {
		case err == nil && status == http.StatusOK:
			var got struct{ IDs []int64 }
			if err := json.Unmarshal(raw, &got); err != nil {
				return retried, 0, fmt.Errorf("the answer %s: %w", raw, err)
			}
			return retried, len(got.IDs), nil
		case err == nil && status != http.StatusServiceUnavailable && status != http.StatusInternalServerError && status != http.StatusTooManyRequests:
			return retried, 0, fmt.Errorf("%d %.200s", status, raw)
		case time.Now().After(deadline):
			return retried, 0, fmt.Errorf("still refused at the deadline: %d %.200s %v", status, raw, err)
		}
		retried++
		time.Sleep(min(max(retryAfter, 200*time.Millisecond), 2*time.Second))
	}
}

// s3Down is S3's answer when it sheds load.
var s3Down = awslocal.S3Error(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")

// restoreDuringS3Outage makes S3 unavailable and restores a request naming
// the run's image in each format every second while it is: each must be a
// 200 that keeps the ref as text and names it unrestored, "unavailable".
// Once S3 is back the same request restores the image.
func restoreDuringS3Outage(t *testing.T, s *stack.Stack, ref string) func() {
	s.S3.Faults.Set(stack.Always(s3Down))
	name := strings.TrimSuffix(strings.TrimPrefix(ref, "[image "), "]")
	host := api{t: t, base: s.URL, token: s.DevToken}
	stop, done := make(chan struct{}), make(chan struct{})
	var restores atomic.Int64
	restore := func(format string, req any) (restored []string, unrestored []struct{ Name, Reason string }, err error) {
		status, raw := host.do(http.MethodPost, "/v1/chats/restore-outage/hooks/before-request", map[string]any{"format": format, "request": req})
		if status != http.StatusOK {
			return nil, nil, fmt.Errorf("%s: %d %s", format, status, raw)
		}
		var got struct {
			Request    json.RawMessage `json:"request"`
			Restored   []string        `json:"restored"`
			Unrestored []struct{ Name, Reason string }
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", format, err)
		}
		if len(got.Restored) == 0 && !strings.Contains(string(got.Request), ref) {
			return nil, nil, fmt.Errorf("%s: the ref left unrestored is not in the request as text: %s", format, got.Request)
		}
		return got.Restored, got.Unrestored, nil
	}
	go func() {
		defer close(done)
		for {
			for format, req := range restoreRequests(ref, ref) {
				restored, unrestored, err := restore(format, req)
				if err != nil {
					t.Error(err)
					continue
				}
				if len(restored) != 0 || len(unrestored) != 1 || unrestored[0].Name != name || unrestored[0].Reason != "unavailable" {
					t.Errorf("%s while S3 is down: restored %v, unrestored %+v; want %s unrestored, unavailable", format, restored, unrestored, name)
				}
				restores.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		s.S3.Faults.Clear()
		t.Logf("%d restores while S3 was down: each a 200 with the ref kept as text", restores.Load())
		for format, req := range restoreRequests(ref, ref) {
			restored, unrestored, err := restore(format, req)
			if err != nil || !slices.Equal(restored, []string{name}) || len(unrestored) != 0 {
				t.Errorf("%s once S3 is back: restored %v, unrestored %+v, %v", format, restored, unrestored, err)
			}
		}
	}
}

// poisonReceives is the redrive policy's maxReceiveCount during the poison
// run: the template's 1000 receives take 2.8 hours of 10 s retries.
const poisonReceives = 10

// poisonRun sends a build message no build can succeed on (its chat's key
// is longer than DynamoDB takes, so every read of its state is refused)
// and follows it to the dead-letter queue, where the template's alarm on
// that queue must see it.
type poisonRun struct {
	body      string
	sent      time.Time
	before    float64 // the alarm's metric before the poison
	alarm     stack.AlarmDef
	dlq, from string // the queues' URLs
}

func (p *poisonRun) inject(t *testing.T, s *stack.Stack, _ string) func() {
	p.dlq, p.from = s.Queues["BuildDeadLetterQueue"], s.Queues["BuildQueue"]
	p.alarm = dlqAlarm(t, s)
	p.before = p.metric(t, s)
	if breach, err := p.alarm.Breaches(p.before); err != nil || breach {
		t.Fatalf("the DLQ's alarm before the poison: metric %v, breaching %v, %v", p.before, breach, err)
	}
	p.redrive(t, s, poisonReceives)
	body, _ := json.Marshal(map[string]any{"tenant": "local", "chat": strings.Repeat("p", 2100), "l": 0, "i": 0})
	p.body = string(body)
	if _, err := s.SQSClient.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(p.from), MessageBody: aws.String(p.body)}); err != nil {
		t.Fatal(err)
	}
	p.sent = time.Now()
	return func() {}
}

// after waits for the poison in the dead-letter queue, evaluates the
// alarm's condition on the queue's metric, and puts the template's
// redrive policy back.
func (p *poisonRun) after(t *testing.T, s *stack.Stack) {
	defer p.redrive(t, s, s.Template.Queues["BuildQueue"].MaxReceiveCount)
	deadline := time.Now().Add(5 * time.Minute)
	var value float64
	for value = p.metric(t, s); value == 0; value = p.metric(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("the poison message is not in the DLQ %s after it was sent", time.Since(p.sent).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	moved := time.Since(p.sent)
	breach, err := p.alarm.Breaches(value)
	if err != nil || !breach {
		t.Errorf("the DLQ's alarm: metric %v, breaching %v, %v; want breaching", value, breach, err)
	}
	out, err := s.SQSClient.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.dlq), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != p.body {
		t.Fatalf("the DLQ holds %d messages, want the poison alone", len(out.Messages))
	}
	m := out.Messages[0]
	t.Logf("the poison reached the DLQ %s after it was sent (maxReceiveCount %d); the %s %s of the DLQ went from %v to %v: %s %v breaches",
		moved.Round(time.Second), poisonReceives, p.alarm.Statistic, p.alarm.MetricName, p.before, value, p.alarm.ComparisonOperator, p.alarm.Threshold)
	if _, err := s.SQSClient.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(p.dlq), ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Error(err)
	}
}

// metric is the alarm's metric of the DLQ: SQS publishes
// ApproximateNumberOfMessagesVisible from the queue's
// ApproximateNumberOfMessages.
func (p *poisonRun) metric(t *testing.T, s *stack.Stack) float64 {
	if p.alarm.MetricName != "ApproximateNumberOfMessagesVisible" {
		t.Fatalf("the DLQ's alarm watches %s, which the stack does not read", p.alarm.MetricName)
	}
	out, err := s.SQSClient.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(p.dlq),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// redrive sets the build queue's maxReceiveCount.
func (p *poisonRun) redrive(t *testing.T, s *stack.Stack, receives int) {
	arn := stack.QueueARN(stack.StackName + "-BuildDeadLetterQueue")
	_, err := s.SQSClient.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(p.from),
		Attributes: map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, arn, receives)}})
	if err != nil {
		t.Fatal(err)
	}
}

// dlqAlarm is the template's alarm on the build queue's dead-letter queue.
func dlqAlarm(t *testing.T, s *stack.Stack) stack.AlarmDef {
	name := stack.StackName + "-BuildDeadLetterQueue"
	for _, a := range s.Template.Alarms {
		if a.Namespace == "AWS/SQS" && a.Dimensions["QueueName"] == name {
			return a
		}
	}
	t.Fatalf("the template has no alarm on the queue %s", name)
	return stack.AlarmDef{}
}
