package awslocal

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// maxRequestBody bounds what LongPoll reads of a request.
const maxRequestBody = 16 << 20

// ShortPollEvery is how often, by default, LongPoll looks again for
// messages no request of its own made visible.
const ShortPollEvery = 100 * time.Millisecond

// LongPoll is an http.Handler in front of a local SQS server that gives
// ReceiveMessage SQS's long-poll behaviour: the answer comes as soon as a
// message is there. local-aws-sqs instead keeps collecting until the wait
// ends, so a message whose visibility runs out during the wait comes back
// in the same answer, several times. LongPoll turns a long poll into short
// polls, asked again when a message may have become visible: at once when
// a request through it sends one or changes a visibility (the poll waiting
// longest looks, and when it finds some, the next one looks too), and
// every Every for what nothing sent (a visibility that ran out), one poll
// of each queue at a time. So a waiting poll costs the server nothing
// while the queue is quiet, and hundreds of them a short poll each Every
// between them.
type LongPoll struct {
	next http.Handler
	// Every is how often one waiting poll of a queue looks again with
	// nothing sent meanwhile; 0 is ShortPollEvery.
	Every time.Duration

	mu      sync.Mutex
	waiting map[string][]chan struct{} // by queue, longest waiting first
	ticking bool
}

// NewLongPoll wraps next, an SQS JSON-protocol handler.
func NewLongPoll(next http.Handler) *LongPoll {
	return &LongPoll{next: next, waiting: map[string][]chan struct{}{}}
}

// visibilityOps are the operations after which a message may be there to
// receive.
var visibilityOps = map[string]bool{
	"SendMessage": true, "SendMessageBatch": true,
	"ChangeMessageVisibility": true, "ChangeMessageVisibilityBatch": true,
}

func (l *LongPoll) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := Operation(r)
	if op != "ReceiveMessage" && !visibilityOps[op] {
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		http.Error(w, "reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req map[string]json.RawMessage
	var wait float64
	var queue string
	if json.Unmarshal(body, &req) == nil {
		json.Unmarshal(req["WaitTimeSeconds"], &wait)
		json.Unmarshal(req["QueueUrl"], &queue)
	}
	// A queue is known by its name: a URL may name the host differently.
	queue = queue[strings.LastIndexByte(queue, '/')+1:]
	if op != "ReceiveMessage" {
		res := Replay(l.next, r, body)
		if res.Code == http.StatusOK {
			l.wake(queue)
		}
		copyAnswer(w, res)
		return
	}
	if wait <= 0 {
		copyAnswer(w, Replay(l.next, r, body))
		return
	}
	req["WaitTimeSeconds"] = json.RawMessage("0")
	short, err := json.Marshal(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	l.wait(w, r, queue, short, time.Duration(wait*float64(time.Second)))
}

// wait answers a long poll of queue for up to d by short polls (the
// request short): one at once, then one each time the poll is woken.
func (l *LongPoll) wait(w http.ResponseWriter, r *http.Request, queue string, short []byte, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		// Waiting is registered before looking, so a send while this
		// poll looks wakes it rather than passing it by.
		woken := l.register(queue)
		res := Replay(l.next, r, short)
		found := res.Code == http.StatusOK && hasMessages(res.Body.Bytes())
		if res.Code != http.StatusOK || found {
			l.unregister(queue, woken)
			if found {
				l.wake(queue) // there may be more than this poll took
			}
			copyAnswer(w, res)
			return
		}
		select {
		case <-woken:
		case <-deadline.C:
			l.leave(queue, woken)
			copyAnswer(w, res)
			return
		case <-r.Context().Done():
			l.leave(queue, woken)
			return
		}
	}
}

// register adds a poll of queue to those waiting and returns the channel
// that wakes it.
func (l *LongPoll) register(queue string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting[queue] = append(l.waiting[queue], ch)
	if !l.ticking {
		l.ticking = true
		go l.tick()
	}
	return ch
}

// unregister removes a poll that stopped waiting; one already woken has
// been removed.
func (l *LongPoll) unregister(queue string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.waiting[queue]
	for i, c := range w {
		if c == ch {
			l.waiting[queue] = append(w[:i:i], w[i+1:]...)
			break
		}
	}
	if len(l.waiting[queue]) == 0 {
		delete(l.waiting, queue)
	}
}

// leave is unregister for a poll that ends without looking again: a wake
// it was given meanwhile goes to the next poll.
func (l *LongPoll) leave(queue string, ch chan struct{}) {
	l.unregister(queue, ch)
	select {
	case <-ch:
		l.wake(queue)
	default:
	}
}

// wake wakes the poll of queue that has waited longest, if any.
func (l *LongPoll) wake(queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeLocked(queue)
}

func (l *LongPoll) wakeLocked(queue string) {
	w := l.waiting[queue]
	if len(w) == 0 {
		return
	}
	w[0] <- struct{}{}
	if len(w) == 1 {
		delete(l.waiting, queue)
	} else {
		l.waiting[queue] = w[1:]
	}
}

// tick wakes one waiting poll of each queue every Every, while any polls
// wait.
func (l *LongPoll) tick() {
	every := l.Every
	if every <= 0 {
		every = ShortPollEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		l.mu.Lock()
		if len(l.waiting) == 0 {
			l.ticking = false
			l.mu.Unlock()
			return
		}
		for q := range l.waiting {
			l.wakeLocked(q)
		}
		l.mu.Unlock()
	}
}

func hasMessages(body []byte) bool {
	var out struct{ Messages []json.RawMessage }
	return json.Unmarshal(body, &out) == nil && len(out.Messages) > 0
}

func copyAnswer(w http.ResponseWriter, res *httptest.ResponseRecorder) {
	for k, vs := range res.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.Code)
	w.Write(res.Body.Bytes())
}

// Operation is the operation a JSON-protocol request (DynamoDB, SQS) names
// in X-Amz-Target, e.g. "PutItem" or "ReceiveMessage".
func Operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	return target[strings.LastIndexByte(target, '.')+1:]
}

// Replay serves r with body to next and returns the recorded answer.
func Replay(next http.Handler, r *http.Request, body []byte) *httptest.ResponseRecorder {
	in := r.Clone(r.Context())
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	res := httptest.NewRecorder()
	next.ServeHTTP(res, in)
	return res
}
