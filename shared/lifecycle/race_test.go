package lifecycle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/lifecycle"
)

// answer is an HTTP answer as a racing client saw it.
type answer struct {
	code       int
	errCode    string
	retryAfter string
	body       string
}

// send is e.do for a goroutine: it returns a transport failure instead of
// failing the test, and the answer's error code and Retry-After.
func (e *env) send(tenant, method, path string, body any) (answer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{code: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: string(out)}
	var fe struct{ Error struct{ Code string } }
	if json.Unmarshal(out, &fe) == nil {
		a.errCode = fe.Error.Code
	}
	return a, nil
}

// settleSoon runs the sweep after a deletion 50 ms after it, so a test
// draining the queue finds it.
func settleSoon(c *lifecycle.Config) { c.SettleAfter = 50 * time.Millisecond }

// deleteAll deletes the chat, calling DELETE until it is done.
func (e *env) deleteAll(tenant, chat string) {
	e.t.Helper()
	for {
		if code, a := e.delete(tenant, chat); code == http.StatusOK && a.Deleted {
			return
		}
	}
}

// sortedKeys is keys, sorted.
func (kb keyedBackend) sortedKeys(t *testing.T) []string {
	keys := kb.keys(t)
	slices.Sort(keys)
	return keys
}

// Appends racing their chat's deletion are each answered 200 (admitted
// before the deletion marked the chat, or after it was done, into the new
// chat the id then names) or 409 deleting with a Retry-After, never 500:
// an append that finds its receipt record or a row of its own gone from
// under it has met the deletion, not a contradiction in the log. And
// nothing is half-written: once the deletion, the sweep after it and a
// deletion of the new chat are done, the stores hold what they held
// before the chat was created.
func TestAppendsRacingTheirChatsDeletionAnswer200Or409AndLeaveNothing(t *testing.T) {
	t.Parallel()
	const writers, each = 6, 8
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			e := newEnvBuilding(t, kb.Backend, 0, nil, nil, settleSoon)
			before := kb.sortedKeys(t)
			e.append("alice", "racy", user("first"), user("second"))
			old := e.current("alice", "racy")

			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				answers []answer
				fails   []error
				started = make(chan struct{}, writers*each)
			)
			for w := range writers {
				img := pngFor(t, color.RGBA{uint8(40 + w), 9, 99, 255})
				wg.Go(func() {
					for i := range each {
						a, err := e.send("alice", "POST", "/v1/chats/racy/messages", map[string]any{"messages": []map[string]any{
							user(fmt.Sprintf("writer %d, append %d", w, i)), withImage("a picture", img), user("and after it")}})
						mu.Lock()
						if err != nil {
							fails = append(fails, err)
						} else {
							answers = append(answers, a)
						}
						mu.Unlock()
						started <- struct{}{}
					}
				})
			}
			// The deletion starts once the appends are under way, and
			// runs to its end while they go on.
			for range writers {
				<-started
			}
			e.deleteAll("alice", "racy")
			wg.Wait()
			if len(fails) > 0 {
				t.Fatalf("%d appends failed to be sent: %v", len(fails), fails[0])
			}
			ok, refused := 0, 0
			for _, a := range answers {
				switch {
				case a.code == http.StatusOK:
					ok++
				case a.code == http.StatusConflict && a.errCode == fault.Deleting && a.retryAfter != "":
					refused++
				default:
					t.Errorf("an append racing the deletion answered %d (Retry-After %q) %s", a.code, a.retryAfter, a.body)
				}
			}
			t.Logf("%d appends answered 200, %d 409 deleting", ok, refused)

			// What the appends after the deletion wrote is the new chat's:
			// deleting it too must leave the stores as they were.
			e.deleteAll("alice", "racy")
			e.drainUntil(func() bool { return slices.Equal(before, kb.sortedKeys(t)) })
			if left := e.partition(old); len(left) != 0 {
				t.Errorf("the deleted incarnation still holds %q", left)
			}
			if after := kb.sortedKeys(t); !slices.Equal(before, after) {
				t.Errorf("keys left by the deleted chat: %q", added(before, after))
			}
		})
	}
}
