package memory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

// A chat deleted while one of its builds runs: the build records nothing,
// so the chat's id starts again with no state.
func TestABuildWhoseChatWasDeletedRecordsNothing(t *testing.T) {
	f := newFixture(t)
	started, release := make(chan struct{}), make(chan struct{})
	f.comp.script = func(c Compaction) (Compacted, error) {
		close(started)
		<-release
		return Compacted{Line: "a summary", Attempts: 1, Model: "scripted"}, nil
	}
	f.append(t, "user", strings.Repeat("a long user message that needs a summary. ", 100))
	msgs := f.queue.take()
	if len(msgs) != 1 {
		t.Fatalf("queued %v, want the leaf's build", msgs)
	}
	done := make(chan error, 1)
	go func() { done <- f.m.Build(context.Background(), f.tenant, f.chat, msgs[0].msg.L, msgs[0].msg.I) }()
	<-started
	// The chat is deleted under the build: its state goes.
	if err := f.table.Delete(context.Background(), stateKey(f.ch()), 0); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Build = %v", err)
	}
	if _, err := f.table.Get(context.Background(), stateKey(f.ch())); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the build wrote a state for the deleted chat: %v", err)
	}
}
