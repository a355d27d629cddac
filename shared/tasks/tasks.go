// Package tasks is the build queue's one router. Every message on the
// queue is a task of one kind, written in one envelope ({"kind":...}),
// decoded once, and run by the one handler registered for its kind:
//
//   - build: build node (l, i) of a chat's incarnation (memory)
//   - delete: run the next steps of an incarnation's deletion (lifecycle)
//   - settle: sweep an incarnation its deletion retired once more
//     (lifecycle)
//   - expire: a step of a retention sweep, or the hourly trigger that
//     starts one (lifecycle)
//
// Messages are ids only, never content. Decode also reads the two formats
// written before the envelope, which a deployed queue may still hold while
// a new version rolls out: {"op":"delete"|"settle"|"expire",...} for the
// lifecycle's tasks, and a build as {"tenant","chat","n","l","i"} with no
// kind at all. Only the envelope is written.
//
// Consumer takes the messages off the queue (an SQS batch the platform
// received, or the local server's in-process worker) and settles each by
// its handler's outcome.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/durachat/durachat/shared/chatid"
)

// Kind names a task: the handler a message goes to.
type Kind string

// The kinds of task the queue carries.
const (
	Build  Kind = "build"
	Delete Kind = "delete"
	Settle Kind = "settle"
	Expire Kind = "expire"
	// Erase continues an erasure (Run names it): it releases the erased
	// messages' images and records the rebuild; sent again with a delay,
	// it settles the images released.
	Erase Kind = "erase"
)

// Message is a queue message: the envelope every task is written in.
// Which fields a kind reads is its own.
type Message struct {
	Kind   Kind   `json:"kind"`
	Tenant string `json:"tenant,omitempty"`
	Chat   string `json:"chat,omitempty"`
	// Inc is the chat's incarnation ("": a chat written before
	// incarnations, or a message sent before they were recorded).
	Inc string `json:"n,omitempty"`
	// L and I name a build's node.
	L int   `json:"l,omitempty"`
	I int64 `json:"i,omitempty"`
	// Run and Seq name a retention sweep's run and the step to run; Run
	// alone names an erasure.
	Run string `json:"run,omitempty"`
	Seq int64  `json:"seq,omitempty"`
}

// For is a message of kind k on the incarnation c.
func For(k Kind, c chatid.Chat) Message {
	return Message{Kind: k, Tenant: c.Tenant, Chat: c.ID, Inc: c.Inc}
}

// ChatID is the incarnation the message names.
func (m Message) ChatID() chatid.Chat {
	return chatid.Chat{Tenant: m.Tenant, ID: m.Chat, Inc: m.Inc}
}

// NamesChat reports whether the message names a chat and a well-formed
// incarnation: what a task on a chat needs.
func (m Message) NamesChat() bool {
	return m.Chat != "" && chatid.ValidInc(m.Inc)
}

// Body is the message as it is sent.
func (m Message) Body() string {
	b, _ := json.Marshal(m) // strings and integers: Marshal does not fail
	return string(b)
}

// ErrMalformed marks a message that names no task, or a task that cannot
// be run as written: retrying cannot help, so it is dropped.
var ErrMalformed = errors.New("tasks: malformed message")

// envelope is what Decode reads: the envelope, and the field that named a
// lifecycle task before it.
type envelope struct {
	Message
	Op Kind `json:"op"`
}

// Decode reads a message in one pass: the envelope, or either format
// written before it (see the package comment).
func Decode(body string) (Message, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	m := e.Message
	switch {
	case m.Kind != "":
	case e.Op != "":
		m.Kind = e.Op
	default:
		m.Kind = Build
	}
	return m, nil
}

// Handler runs one task. An error asks for the message again (after the
// delay a RetryDelay in its chain names); one wrapping ErrMalformed drops
// it.
type Handler func(ctx context.Context, m Message) error

// RetryDelay is an error that says when its message should come back.
type RetryDelay interface {
	error
	RetryDelay() time.Duration
}

// Router holds the one handler of each kind.
type Router struct {
	handlers map[Kind]Handler
}

// NewRouter returns a router with the handlers given, by kind.
func NewRouter(handlers map[Kind]Handler) *Router {
	r := &Router{handlers: make(map[Kind]Handler, len(handlers))}
	for _, k := range slices.Sorted(maps.Keys(handlers)) {
		r.Handle(k, handlers[k])
	}
	return r
}

// Handle registers h for kind k. A kind has one handler: registering a
// second is a wiring bug, and panics.
func (r *Router) Handle(k Kind, h Handler) {
	if k == "" || h == nil {
		panic("tasks: a handler needs a kind and a func")
	}
	if _, ok := r.handlers[k]; ok {
		panic(fmt.Sprintf("tasks: kind %q has a handler already", k))
	}
	r.handlers[k] = h
}

// Kinds are the kinds with a handler, in order.
func (r *Router) Kinds() []Kind {
	return slices.Sorted(maps.Keys(r.handlers))
}

// Route decodes body and runs the handler of its kind; it returns the
// message read, for the caller's log. A message of no registered kind is
// malformed.
func (r *Router) Route(ctx context.Context, body string) (Message, error) {
	m, err := Decode(body)
	if err != nil {
		return m, err
	}
	h, ok := r.handlers[m.Kind]
	if !ok {
		return m, fmt.Errorf("%w: no task of kind %q", ErrMalformed, m.Kind)
	}
	return m, h(ctx, m)
}

// logged marks the error of a handler that recorded its failure itself.
type logged struct{ error }

func (l logged) Unwrap() error { return l.error }

// Logged wraps the error of a handler that logged its failure itself (a
// build records its own outcome), so the consumer adds no record of its
// own; nil stays nil.
func Logged(err error) error {
	if err == nil {
		return nil
	}
	return logged{err}
}
