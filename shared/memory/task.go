package memory

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/durachat/durachat/shared/tasks"
)

// BuildTask is the handler of the queue's build messages (tasks.Build): it
// builds the node the message names. A message that names no node is
// malformed (tasks.ErrMalformed). A build logs its own outcome, so its
// error is tasks.Logged. A panic becomes an error that asks for the
// message again, so one bad build never fails a whole batch or stops the
// worker; its claim lapses with its lease.
func (m *Memory) BuildTask(ctx context.Context, msg tasks.Message) (err error) {
	if err := checkBuild(msg); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			node := Node{L: msg.L, I: msg.I}.Label()
			m.logger.ErrorContext(ctx, "memory: build panicked", "chat", msg.Chat, "node", node, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = &RetryError{After: m.retry, Err: fmt.Errorf("build of node %s of %s panicked: %v", node, msg.Chat, p)}
		}
		err = tasks.Logged(err)
	}()
	// A message of a deleted incarnation (delivered late, or again) builds
	// nothing: the chat its id names now is another one. build finds that
	// out from the incarnation's state, which went with it, before it
	// claims anything (no read of the identity of its own).
	if err := m.build(ctx, msg.ChatID(), msg.L, msg.I); err != nil {
		return err
	}
	if msg.L == 0 {
		// Each leaf built seals the search index's complete segments, so
		// it follows the log as entries are logged; a search seals what
		// is left.
		if _, err := m.sealSearch(ctx, msg.ChatID()); err != nil {
			m.logger.WarnContext(ctx, "memory: sealing the search index", "chat", msg.Chat, "err", err)
		}
		m.embedFollow(ctx, msg.ChatID())
	}
	return nil
}

// checkBuild refuses a build message that names no node of a chat's
// incarnation.
func checkBuild(msg tasks.Message) error {
	if !msg.NamesChat() || msg.L < 0 || msg.L > 62 || msg.I < 0 {
		return fmt.Errorf("%w: build of node (%d, %d) of chat %q, incarnation %q", tasks.ErrMalformed, msg.L, msg.I, msg.Chat, msg.Inc)
	}
	return nil
}

// ClaimLease is how long a build's claim lasts: the least time a queue
// consumer must hide a build message it received.
func (m *Memory) ClaimLease() time.Duration { return m.claimLease }
