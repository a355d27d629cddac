package memory

import (
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/transcript"
)

// A leaf an erasure takes back counts in the view's size as the
// placeholder it shows until it is built again, and then as its new line,
// once: the tracked size is the rendered size before the erasure, while
// the leaf is taken back, and after its rebuild.
func TestTheViewSizeIsExactAfterAnErasedLeafIsRebuilt(t *testing.T) {
	f := newFixture(t)
	f.append(t, "user", "the first message", "the second message, "+strings.Repeat("long ", 30), "the third message")
	f.deliverAll(t)
	check := func(when string) {
		t.Helper()
		v, err := f.m.ReadView(t.Context(), f.tenant, f.chat, false)
		if err != nil {
			t.Fatal(err)
		}
		if st := f.state(t); v.Bytes != st.View.Size || v.Bytes != st.Compact.Size {
			t.Errorf("%s: rendered view is %d bytes, state says %d (compact %d)", when, v.Bytes, st.View.Size, st.Compact.Size)
		}
	}
	check("built")
	f.erase(t, 1)
	check("taken back")
	f.deliverAll(t)
	if st := f.state(t); len(st.Stale) != 0 {
		t.Fatalf("not rebuilt: %+v", st.Stale)
	}
	check("rebuilt")
}

// erase erases entry id from the fake log, as the log does, and tells
// memory (Erased).
func (f *fixture) erase(t *testing.T, id int64) {
	t.Helper()
	f.log.mu.Lock()
	e := &f.log.entries[f.chat][id]
	e.Erased = f.clock.Now()
	e.Text = transcript.ErasedText(e.Erased)
	f.log.mu.Unlock()
	if _, err := f.m.Erased(t.Context(), f.ch(), []int64{id}); err != nil {
		t.Fatal(err)
	}
}
