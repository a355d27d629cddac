package memory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
)

// A chat deleted while one of its builds runs: the build records nothing,
// so the chat's id starts again with no state.
func TestABuildWhoseChatWasDeletedRecordsNothing(t *testing.T) {
	f := newFixture(t)
	started, release := make(chan struct{}), make(chan struct{})
	f.comp.script = func(c CompactRequest) (Compacted, error) {
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

// Nothing is written for an incarnation its id no longer names: not a
// state from a late notice of its appends, not a node from its build
// messages delivered again.
func TestNothingIsWrittenForADeletedIncarnation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := chatid.Chat{Tenant: f.tenant, ID: f.chat, Inc: "0123456789abcdef"}
	cur, err := chatid.New(f.table).Open(ctx, f.tenant, f.chat)
	if err != nil || cur == old {
		t.Fatalf("Open = %+v, %v", cur, err)
	}
	f.log.add(f.chat, "user", "hello")
	if err := f.m.Appended(ctx, old, 1); err != nil {
		t.Fatalf("Appended = %v", err)
	}
	body := tasks.For(tasks.Build, old).Body()
	if retry := f.consumer().HandleBatch(ctx, []store.Delivery{{ID: "1", Body: body}}); len(retry) != 0 {
		t.Fatalf("the deleted incarnation's message is kept for a retry: %v", retry)
	}
	page, err := f.table.Query(ctx, store.Query{PK: old.PK()})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("the deleted incarnation's partition holds %d items (%v), want none", len(page.Items), err)
	}
	if f.queue.take() != nil {
		t.Fatal("builds were queued for the deleted incarnation")
	}
	// The current incarnation is served as ever.
	if err := f.m.Appended(ctx, cur, 1); err != nil {
		t.Fatal(err)
	}
	if msgs := f.queue.take(); len(msgs) != 1 || msgs[0].msg.Inc != cur.Inc {
		t.Fatalf("queued %+v, want the current incarnation's leaf", msgs)
	}
}
