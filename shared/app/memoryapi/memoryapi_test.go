package memoryapi

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/tasks"
)

// Every kind of task the queue carries has its handler in the one router
// the programs share: a kind without one would be dropped as malformed.
func TestEveryKindOfTaskHasItsHandler(t *testing.T) {
	q := storefake.NewQueue()
	a, err := New(config.Config{}, app.Stores{Table: storefake.NewTable(), Blobs: storefake.NewBlobs(), Queue: q, Receiver: q}, Models{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []tasks.Kind{tasks.Build, tasks.Delete, tasks.Erase, tasks.Expire, tasks.Settle}
	if got := router(a.Memory, a.Chats).Kinds(); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
}
