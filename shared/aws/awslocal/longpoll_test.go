package awslocal_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// queueServer is the part of an SQS JSON-protocol server LongPoll's rules
// need: short receives (no server-side wait) that it counts, and sends.
type queueServer struct {
	mu       sync.Mutex
	messages []string
	receives int
}

func (q *queueServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		WaitTimeSeconds *int
		MessageBody     string
	}
	json.NewDecoder(r.Body).Decode(&req)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch awslocal.Operation(r) {
	case "ReceiveMessage":
		if req.WaitTimeSeconds == nil || *req.WaitTimeSeconds != 0 {
			http.Error(w, "LongPoll passed a long poll on", http.StatusBadRequest)
			return
		}
		q.receives++
		out := []map[string]string{}
		for _, m := range q.messages {
			out = append(out, map[string]string{"Body": m})
		}
		q.messages = nil
		json.NewEncoder(w).Encode(map[string]any{"Messages": out})
	case "SendMessage":
		q.messages = append(q.messages, req.MessageBody)
		fmt.Fprint(w, `{"MessageId":"1"}`)
	default:
		http.Error(w, "unknown operation", http.StatusBadRequest)
	}
}

// put makes a message visible the way a visibility timeout running out
// does: with no request.
func (q *queueServer) put(body string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.messages = append(q.messages, body)
}

func (q *queueServer) receiveCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.receives
}

func call(t *testing.T, url, op string, body map[string]any) []string {
	t.Helper()
	js, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(js))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Errorf("%s: %d %s", op, res.StatusCode, raw)
	}
	var out struct{ Messages []struct{ Body string } }
	json.Unmarshal(raw, &out)
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, m.Body)
	}
	return bodies
}

const queueURL = "http://localhost/000000000000/builds"

func receive(t *testing.T, url string, wait int) []string {
	return call(t, url, "ReceiveMessage", map[string]any{"QueueUrl": queueURL, "WaitTimeSeconds": wait})
}

// untilReceives waits for the server to have seen n receives.
func untilReceives(t *testing.T, q *queueServer, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.receiveCount() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server saw %d receives, want %d", q.receiveCount(), n)
		}
	}
}

func startLongPoll(t *testing.T, every time.Duration) (*queueServer, string) {
	q := &queueServer{}
	lp := awslocal.NewLongPoll(q)
	lp.Every = every
	srv := httptest.NewServer(lp)
	t.Cleanup(srv.Close)
	return q, srv.URL
}

// A send through LongPoll wakes the waiting poll at once: with no
// periodic look (Every an hour), the poll still answers with the message
// rather than empty at the end of its 20 s.
func TestASendWakesTheWaitingPoll(t *testing.T) {
	q, url := startLongPoll(t, time.Hour)
	got := make(chan []string)
	go func() { got <- receive(t, url, 20) }()
	untilReceives(t, q, 1)
	call(t, url, "SendMessage", map[string]any{"QueueUrl": queueURL, "MessageBody": "build"})
	if bodies := <-got; len(bodies) != 1 || bodies[0] != "build" {
		t.Fatalf("the poll answered %v, want the message sent while it waited", bodies)
	}
}

// Waiting polls cost the server nothing while nothing is sent: each looks
// once when it arrives, and a send makes one poll look (and the next one,
// since the first found a message), not every poll.
func TestWaitingPollsLookOnlyWhenWoken(t *testing.T) {
	q, url := startLongPoll(t, time.Hour)
	const polls = 50
	var wg sync.WaitGroup
	answers := make(chan []string, polls)
	for range polls {
		wg.Go(func() { answers <- receive(t, url, 2) })
	}
	untilReceives(t, q, polls)
	call(t, url, "SendMessage", map[string]any{"QueueUrl": queueURL, "MessageBody": "build"})
	wg.Wait()
	close(answers)
	got := 0
	for a := range answers {
		got += len(a)
	}
	if got != 1 {
		t.Errorf("the polls received %d messages, want the 1 sent", got)
	}
	if n := q.receiveCount(); n != polls+2 {
		t.Errorf("the server saw %d receives, want %d: one per poll, one for the send and one after a poll found a message", n, polls+2)
	}
}

// A message that became visible with no request (a visibility timeout
// that ran out) is found by the periodic look.
func TestAMessageNothingSentIsFoundByThePeriodicLook(t *testing.T) {
	q, url := startLongPoll(t, 10*time.Millisecond)
	got := make(chan []string)
	go func() { got <- receive(t, url, 20) }()
	untilReceives(t, q, 1)
	q.put("redelivered")
	if bodies := <-got; len(bodies) != 1 || bodies[0] != "redelivered" {
		t.Fatalf("the poll answered %v, want the message made visible while it waited", bodies)
	}
}
