package awstest

import (
	"net/http"
	"sync"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// Faults is an http.Handler that answers chosen requests with an error
// instead of passing them on: a real protocol fault (a 500, a throttling
// answer) for testing how a client maps and retries them.
type Faults struct {
	next  http.Handler
	mu    sync.Mutex
	rules []*fault
}

type fault struct {
	match  func(*http.Request) bool
	answer Answer
	left   int // answers still to give; < 0 is until cleared
}

// Answer is an error answer in one of the AWS protocols.
type Answer = awslocal.Answer

// NewFaults wraps next; it passes everything on until a fault is added.
// A Faults with no next (nil) only answers for a handler that asks it, as
// Fidelity does.
func NewFaults(next http.Handler) *Faults { return &Faults{next: next} }

// Add makes the next times requests that match get answer; times < 0 keeps
// answering until Clear.
func (f *Faults) Add(match func(*http.Request) bool, times int, answer Answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &fault{match: match, answer: answer, left: times})
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

func (f *Faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a, ok := f.take(r); ok {
		w.Header().Set("Content-Type", a.ContentType)
		w.WriteHeader(a.Status)
		w.Write(a.Body)
		return
	}
	f.next.ServeHTTP(w, r)
}

func (f *Faults) take(r *http.Request) (Answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rule := range f.rules {
		if rule.left != 0 && rule.match(r) {
			if rule.left > 0 {
				rule.left--
			}
			return rule.answer, true
		}
	}
	return Answer{}, false
}

// Operation matches JSON-protocol requests (DynamoDB, SQS) naming op in
// X-Amz-Target, e.g. "PutItem" or "ReceiveMessage".
func Operation(op string) func(*http.Request) bool {
	return func(r *http.Request) bool { return operation(r) == op }
}

// Method matches requests by HTTP method, e.g. "PUT" for S3's PutObject.
func Method(method string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == method }
}

// DynamoDBError is an error answer in DynamoDB's JSON protocol, e.g.
// (400, "ThrottlingException") or (500, "InternalServerError").
func DynamoDBError(status int, code, message string) Answer {
	return awslocal.DynamoDBError(status, code, message)
}

// SQSError is an error answer in SQS's JSON protocol.
func SQSError(status int, code, message string) Answer {
	return awslocal.SQSError(status, code, message)
}

// S3Error is an error answer in S3's XML protocol, e.g. (503, "SlowDown")
// or (409, "ConditionalRequestConflict").
func S3Error(status int, code, message string) Answer {
	return awslocal.S3Error(status, code, message)
}
