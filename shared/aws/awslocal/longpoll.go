package awslocal

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// maxRequestBody bounds what LongPoll reads of a request.
const maxRequestBody = 16 << 20

// shortPollEvery is how often a long poll looks for messages.
const shortPollEvery = 100 * time.Millisecond

// LongPoll is an http.Handler in front of a local SQS server that gives
// ReceiveMessage SQS's long-poll behaviour: the answer comes as soon as a
// message is there. local-aws-sqs instead keeps collecting until the wait
// ends, so a message whose visibility runs out during the wait comes back
// in the same answer, several times. LongPoll turns a long poll into short
// polls, every 100 ms until a message comes or the wait is over.
type LongPoll struct{ next http.Handler }

// NewLongPoll wraps next, an SQS JSON-protocol handler.
func NewLongPoll(next http.Handler) *LongPoll { return &LongPoll{next: next} }

func (l *LongPoll) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if Operation(r) != "ReceiveMessage" {
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
	if json.Unmarshal(body, &req) == nil {
		json.Unmarshal(req["WaitTimeSeconds"], &wait)
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
	deadline := time.Now().Add(time.Duration(wait * float64(time.Second)))
	for {
		res := Replay(l.next, r, short)
		if res.Code != http.StatusOK || hasMessages(res.Body.Bytes()) || !time.Now().Add(shortPollEvery).Before(deadline) {
			copyAnswer(w, res)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(shortPollEvery):
		}
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
