package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durachat/durachat/shared/fault"
)

// Bodies take their room, times their route's copies, before they are
// read; a request that finds no room within the wait is a 503, and room
// given back is taken by the next.
func TestHeldBodiesWaitForRoomAndAreRefusedAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := NewHeld(3*MaxBody, 10*time.Second).Copies(2)
		post := func(n int) *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
			r.ContentLength = int64(n)
			return r
		}
		first, err := held.Hold(post(MaxBody)) // 2 x MaxBody of 3
		if err != nil {
			t.Fatal(err)
		}
		small, err := held.Hold(post(MaxBody / 2)) // the third MaxBody
		if err != nil {
			t.Fatal(err)
		}
		small()
		start := time.Now()
		_, err = held.Hold(post(MaxBody))
		if fe, ok := errors.AsType[*fault.Error](err); !ok || fe.Code != fault.Unavailable {
			t.Fatalf("a body with no room: %v, want unavailable", err)
		}
		if waited := time.Since(start); waited != 10*time.Second {
			t.Errorf("waited %s, want the 10 s wait", waited)
		}
		got := make(chan error, 1)
		go func() {
			release, err := held.Hold(post(MaxBody))
			if err == nil {
				release()
			}
			got <- err
		}()
		synctest.Wait()
		first()
		if err := <-got; err != nil {
			t.Fatalf("room given back was not taken: %v", err)
		}
		if release, err := held.Hold(post(-1)); err != nil { // undeclared: MaxBody
			t.Fatal(err)
		} else {
			release()
		}
	})
}
