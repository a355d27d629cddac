package transcript

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// TestReceiptRecordsExpireAfterTheRetryWindow: a receipt's record carries
// the table's TTL, ReceiptWindow after the append (by the wall clock,
// which the table's TTL reads); entries never expire.
func TestReceiptRecordsExpireAfterTheRetryWindow(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		before := time.Now().Add(ReceiptWindow).Unix()
		if _, err := f.log.Append(context.Background(), tenant, chat, textMsgs("a", 3), "r1"); err != nil {
			t.Fatal(err)
		}
		after := time.Now().Add(ReceiptWindow).Unix()
		records := 0
		for _, it := range f.table.writes() {
			switch {
			case strings.HasPrefix(it.SK, store.ReceiptPrefix):
				records++
				if it.Expires < before || it.Expires > after {
					t.Errorf("record %s expires at %d, want %v after the append (%d-%d)", it.SK, it.Expires, ReceiptWindow, before, after)
				}
			case it.Expires != 0:
				t.Errorf("row %s expires at %d: only receipt records may", it.SK, it.Expires)
			}
		}
		if records != 1 {
			t.Fatalf("%d receipt records written, want 1", records)
		}
	})
}
