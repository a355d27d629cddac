package memory

import (
	"strings"
	"testing"

	"github.com/durachat/durachat/client/wire"
)

// The forget tool's receipt says what happened: messages forgotten, a
// large chat's scan still running (nothing found yet is not nothing
// forgotten), or a request the scan refused.
func TestTheForgetReceiptSaysWhetherTheScanIsStillRunningOrRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    wire.Erasure
		want string
	}{
		{"forgotten", wire.Erasure{Erasure: "x", Messages: []wire.ErasedMessage{{Seq: 3, Entries: []int64{3}}}, Done: true}, "forgot 1 message(s) (entries 3)"},
		{"scanning", wire.Erasure{Erasure: "x", Messages: []wire.ErasedMessage{}}, "being looked for in the background"},
		{"refused", wire.Erasure{Erasure: "x", Messages: []wire.ErasedMessage{}, Done: true, Refused: "over 1000 messages match"}, "forgot nothing: over 1000 messages match"},
	} {
		if got := forgetReceipt(tc.e); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, got, tc.want)
		}
	}
}
