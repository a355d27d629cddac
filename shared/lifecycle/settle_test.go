package lifecycle_test

import (
	"image/color"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// A write that found its chat current, held up until the chat's deletion
// has finished, lands in the retired incarnation after the deletion's last
// page; the sweep the deletion queued removes it, so the stores end as they
// were before the chat was created. The writer runs in one process, the
// deletion and the queue in another. The writers are an append admitted
// before the deletion marked the chat, paused at each of its writes in
// turn (and as it stores its image), and an after-tool call paused as it
// stores its image: the last two pause after recording that the chat names
// the image (both hold it before they store it, lifecycle.Chats.Hold),
// which the deletion then releases. What they write after the pause is
// every kind a late writer leaves (the chat's reference to an image, the
// image, a receipt, an entry). Without the sweep all of it stays, the image named by a chat
// that no longer exists, and never deleted; without the writer's second
// look at its chat after storing an image, that image stays named by
// nothing. (The hook's second look finds its chat gone and deletes the
// image itself, so it leaves the sweep nothing.)
func TestAWriteThatRacedItsChatsDeletionIsSweptAfterIt(t *testing.T) {
	t.Parallel()
	appendImage := func(e *env, img string) int {
		code, _ := e.do("alice", "POST", "/v1/chats/gone/messages", map[string]any{"messages": []map[string]any{withImage("late", img)}})
		return code
	}
	afterTool := func(e *env, img string) int {
		code, _ := e.do("alice", "POST", "/v1/chats/gone/hooks/after-tool", map[string]any{
			"call": map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []map[string]any{
				{"type": "text", "text": "shot"}, {"type": "image", "data": img, "mimeType": "image/png"}}}})
		return code
	}
	inChat := func(prefix string) func(ch chatid.Chat, k store.Key) bool {
		return func(ch chatid.Chat, k store.Key) bool { return k.PK == ch.PK() && strings.HasPrefix(k.SK, prefix) }
	}
	// A writer pauses at the create table matches, or at the nth write of
	// an image.
	writers := map[string]struct {
		send  func(e *env, img string) int
		table func(ch chatid.Chat, k store.Key) bool
		blob  int
		// clean: the writer leaves nothing (it deletes its image itself).
		clean bool
	}{
		"AnAppendPausedAtItsReference": {send: appendImage, table: inChat(store.ChatImagePrefix)},
		"AnAppendPausedAtItsReceipt":   {send: appendImage, table: inChat("r/")},
		"AnAppendPausedAtItsEntry":     {send: appendImage, table: inChat(store.EntryPrefix)},
		"AnAppendPausedAtItsImage":     {send: appendImage, blob: 1},
		"AHookPausedAtItsImage":        {send: afterTool, blob: 1, clean: true},
	}
	for name, w := range writers {
		t.Run(name, func(t *testing.T) {
			for _, kb := range keyedBackends(t) {
				t.Run(kb.Name, func(t *testing.T) {
					var (
						mu      sync.Mutex
						armed   bool
						ch      chatid.Chat
						puts    int // image writes since armed
						reached = make(chan struct{})
						release = make(chan struct{})
					)
					pause := func(match func() bool) error {
						mu.Lock()
						hit := armed && match()
						if hit {
							armed = false // once
						}
						mu.Unlock()
						if hit {
							close(reached)
							<-release
						}
						return nil
					}
					b := kb.Backend
					b.Table = &testenv.FailingTable{Table: kb.Table, FailCreate: func(k store.Key) error {
						return pause(func() bool { return w.table != nil && w.table(ch, k) })
					}}
					isImage := func(key string) bool {
						return strings.HasPrefix(key, "images/") && !strings.HasSuffix(key, ".description")
					}
					b.Blobs = &testenv.FailingBlobs{Blobs: kb.Blobs,
						FailPut: func(key string) error {
							return pause(func() bool {
								if !isImage(key) {
									return false
								}
								puts++
								return puts == w.blob
							})
						},
					}
					// Two processes: the writer's, and the one that deletes
					// the chat and runs the queue.
					settle := func(c *lifecycle.Config) { c.SettleAfter = 50 * time.Millisecond }
					e := newEnvBuilding(t, b, 0, nil, nil, settle)
					d := newEnvBuilding(t, b, 0, nil, nil, settle)
					before := kb.keys(t)
					e.append("alice", "gone", user("first"))
					mu.Lock()
					ch, armed = e.current("alice", "gone"), true
					mu.Unlock()

					late := make(chan int, 1)
					img := pngFor(t, color.RGBA{12, 12, 120, 255})
					go func() { late <- w.send(e, img) }()
					select {
					case <-reached:
					case code := <-late:
						t.Fatalf("the writer answered %d without reaching its pause", code)
					}
					if code, a := d.delete("alice", "gone"); code != http.StatusOK || !a.Deleted {
						t.Fatalf("delete = %d %+v, want it done in the call", code, a)
					}
					close(release)
					// Admitted before the deletion, the write is ordered
					// before it: answered 200, then deleted with its chat.
					if code := <-late; code != http.StatusOK {
						t.Fatalf("the late writer answered %d", code)
					}
					if !w.clean && len(e.partition(ch)) == 0 && !e.imageStored("alice", img) {
						t.Fatal("the late writer left nothing behind: the test raced nothing")
					}

					// The sweep's message is delayed (on SQS to a whole
					// second), so a receive that finds nothing does not
					// mean it ran: run the queue until the chat's keys
					// are gone, the deadline only catching a hang.
					slices.Sort(before)
					d.drainUntil(func() bool {
						now := kb.keys(t)
						slices.Sort(now)
						return slices.Equal(before, now)
					})
					if left := d.partition(ch); len(left) != 0 {
						t.Errorf("the deleted incarnation still holds %q", left)
					}
					if e.imageStored("alice", img) {
						t.Error("the image only the deleted chat named is still stored")
					}
					after := kb.keys(t)
					slices.Sort(after)
					if !slices.Equal(before, after) {
						t.Errorf("keys left by the deleted chat: %q", added(before, after))
					}
				})
			}
		})
	}
}

// added returns the keys in after that before lacks.
func added(before, after []string) []string {
	var out []string
	for _, k := range after {
		if _, found := slices.BinarySearch(before, k); !found {
			out = append(out, k)
		}
	}
	return out
}

// The sweep after a deletion removes only what the deleted incarnation
// left: delivered while the id still names that incarnation (a deletion
// whose last step failed, retried later with a sweep of its own), or once
// the id names a new chat, it deletes nothing of the chat the id names.
func TestTheSweepAfterADeletionDeletesNothingOfTheChatTheIdNames(t *testing.T) {
	t.Parallel()
	cases := map[string]func(e *env) (sweep string){
		"TheIdStillNamesIt": func(e *env) string {
			e.append("alice", "kept", user("still here"))
			return `{"kind":"settle","tenant":"alice","chat":"kept","n":"` + e.current("alice", "kept").Inc + `"}`
		},
		"TheIdNamesANewChat": func(e *env) string {
			e.append("alice", "kept", user("deleted"))
			old := e.current("alice", "kept")
			if _, a := e.delete("alice", "kept"); !a.Deleted {
				t.Fatalf("delete = %+v", a)
			}
			e.append("alice", "kept", user("still here"))
			return `{"kind":"settle","tenant":"alice","chat":"kept","n":"` + old.Inc + `"}`
		},
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			for _, b := range backends(t) {
				t.Run(b.Name, func(t *testing.T) {
					e := newEnvBuilding(t, b, 0, nil, nil, func(c *lifecycle.Config) { c.SettleAfter = time.Millisecond })
					sweep := prepare(e)
					if _, err := e.tasks.Route(t.Context(), sweep); err != nil {
						t.Fatalf("Route(%s) = %v", sweep, err)
					}
					e.drain() // and the sweep the deletion queued, if any
					p := e.messages("alice", "kept", "")
					if len(p.Messages) != 1 || !strings.Contains(string(p.Messages[0].Message), "still here") {
						t.Fatalf("the chat the id names reads %d messages, want its one", len(p.Messages))
					}
				})
			}
		})
	}
}
