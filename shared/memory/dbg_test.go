package memory

import (
	"context"
	"fmt"
	"testing"
)

func TestDebugState(t *testing.T) {
	f := newFixture(t)
	n := 0
	for _, at := range []int{1000, 20000} {
		for ; n < at; n++ {
			f.log.add(f.chat, "user", fmt.Sprintf("m%d", n))
		}
		f.m.Appended(context.Background(), f.tenant, f.chat, int64(n))
		f.deliverAll(t)
		st := f.state(t)
		t.Logf("T=%d bytes=%d viewRuns=%d compactRuns=%d viewLines=%d size=%d cl=%d", at, f.table.stateBytes(f.tenant, f.chat), len(st.View.Runs), len(st.Compact.Runs), st.View.lines(), st.View.Size, st.Compact.lines())
	}
}
