package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// eachBackendAndDynalite is eachBackend, and the AWS adapters on
// dynalite, the strict DynamoDB.
func eachBackendAndDynalite(t *testing.T, fn func(t *testing.T, f *fixture)) {
	all := testenv.All(t)
	if !testing.Short() {
		for _, b := range all {
			if b.Name == "aws" {
				d := awstest.StartDynalite(t)
				b.Name, b.Table = "dynalite", dynamo.New(d.Client, d.CreateTable(t))
				all = append(all, b)
				break
			}
		}
	}
	for _, be := range all {
		t.Run(be.Name, func(t *testing.T) { fn(t, newFixture(t, be)) })
	}
}

// readRecords reads the whole log back as the record sees it: the JSON of
// each message, and for each entry whether it starts a message, continues
// one or is an entry written before records.
func (f *fixture) readRecords(t *testing.T) (msgs []string, shape string) {
	t.Helper()
	lgs, err := f.log.Read(context.Background(), f.cur(tenant, chat), 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, lg := range lgs {
		switch {
		case lg.Record != nil:
			shape += "m"
			msgs = append(msgs, string(lg.Record.JSON))
		case lg.Continues:
			shape += "c"
		default:
			shape += "l"
		}
	}
	return msgs, shape
}

// TestAMessageIsRecordedOnceWhateverTheEntriesOrCrashes: each message is
// recorded on the entry where it starts, its other entries continue it; a
// record too big for its row is kept in a blob; an append cut off after
// its claim reads back whole.
func TestAMessageIsRecordedOnceWhateverTheEntriesOrCrashes(t *testing.T) {
	long := strings.Repeat("x", PieceChars*2+1) // three entries
	huge := strings.Repeat("y", store.ItemBudget)
	sent := []string{
		`{"content":"` + long + `","role":"user","timestamp":1}`,
		`{"content":[{"thinking":"only this","thinkingSignature":"s","type":"thinking"}],"role":"assistant","stopReason":"stop"}`,
		`{"content":[],"errorMessage":"overloaded","role":"assistant","stopReason":"error"}`,
		`{"content":[{"text":"ok","type":"text"}],"details":{"out":"` + huge + `"},"isError":false,"role":"toolResult","toolCallId":"c","toolName":"t"}`,
	}
	for _, crash := range []bool{false, true} {
		name := "WholeAppend"
		if crash {
			name = "CutOffAfterItsClaim"
		}
		t.Run(name, func(t *testing.T) {
			eachBackendAndDynalite(t, func(t *testing.T, f *fixture) {
				var msgs []pi.Message
				for _, s := range sent {
					msgs = append(msgs, msg(t, s))
				}
				if crash {
					crashAfterClaim(f)
					if _, err := f.log.Append(context.Background(), tenant, chat, msgs, "rec"); !errors.Is(err, store.ErrUnavailable) {
						t.Fatalf("append during the outage: %v", err)
					}
					f.table.setFail(nil)
				} else if _, err := f.log.Append(context.Background(), tenant, chat, msgs, "rec"); err != nil {
					t.Fatal(err)
				}
				got, shape := f.readRecords(t)
				if shape != "mccmmm" {
					t.Fatalf("entries read as %q, want a message of three entries and three of one", shape)
				}
				for i := range sent {
					if got[i] != sent[i] {
						t.Fatalf("message %d recorded as %.200s, want %.200s", i, got[i], sent[i])
					}
				}
				for _, it := range f.entryRows() {
					if it.Size() > store.ItemBudget {
						t.Fatalf("row %s is %d bytes, over the budget", it.SK, it.Size())
					}
				}
				it, err := f.table.Get(context.Background(), store.Key{PK: f.cur(tenant, chat).PK(), SK: store.EntrySK(5)})
				if err != nil {
					t.Fatal(err)
				}
				var r row
				if err := json.Unmarshal(it.Body, &r); err != nil || r.RecKey == "" || r.Rec != nil {
					t.Fatalf("the tool result's row keeps its record in the row (%v), want it in a blob", err)
				}
			})
		})
	}
}
