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
	"github.com/durachat/durachat/shared/rawjson"
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

// A large append's record and its rows are written as encoding/json
// writes them (rawjson.Of), though made without encoding them again: a
// blob's bytes name it, so twins, and appends before this way of making
// them, store the same blob under the same key.
func TestLargeRecordsAndRowListsAreWrittenAsEncodingJSONWritesThem(t *testing.T) {
	texts := []string{"plain", `quotes " and \ slashes`, "<html> & </html>", "line\nbreak\ttab", "é 漢字 🙂", "\u2028\u2029", ""}
	var rows []row
	list := rowList{}
	for k, text := range texts {
		of := int64(k)
		r := row{Kind: KindUser, Text: text, Date: int64(k), Receipt: "r<&>", Pos: k, N: len(texts), Tool: "zoom", Of: &of, Cont: k > 0}
		if k == 1 {
			r.TextKey, r.Text = "t/key", ""
		}
		body, err := rawjson.Of(r)
		if err != nil {
			t.Fatal(err)
		}
		rows, list = append(rows, r), list.add(body)
		want, err := rawjson.Of(rows)
		if err != nil {
			t.Fatal(err)
		}
		if got := list.done(); string(got) != string(want) {
			t.Errorf("%d rows joined:\n%s\nencoded:\n%s", len(rows), got, want)
		}
	}
	if got := (rowList{}).done(); string(got) != "null" {
		t.Errorf("no rows joined: %s, want null", got)
	}

	for _, tt := range []struct {
		name string
		msg  string
		imgs []string
	}{
		{"text", `{"role":"user","content":"<b> & \u2028 é"}`, nil},
		{"blocks and images", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","mimeType":"image/png","data":"AAAA"}],"timestamp":1}`, []string{"0123456789abcdef"}},
	} {
		var m pi.Message
		if err := json.Unmarshal([]byte(tt.msg), &m); err != nil {
			t.Fatal(err)
		}
		rec, err := makeRecord(m, tt.imgs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := rawjson.Of(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rec.encoded()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: record made\n%s\nencoded:\n%s", tt.name, got, want)
		}
	}
}

// A message already compact is recorded from its bytes as they are; one
// with whitespace between its tokens is compacted first.
func TestIsCompactFindsWhitespaceOutsideStringsOnly(t *testing.T) {
	for _, tt := range []struct {
		json string
		want bool
	}{
		{`{"a":"x y\tz"}`, true},
		{`{"a": 1}`, false},
		{"{\"a\":1}\n", false},
		{`{"a":"q\" x"}`, true},
		{`{"a":"\\","b":1}`, true},
		{`{"a":"\\" ,"b":1}`, false},
		{`[1,"]",{"b":[ ]}]`, false},
	} {
		if got := isCompact([]byte(tt.json)); got != tt.want {
			t.Errorf("isCompact(%s) = %v, want %v", tt.json, got, tt.want)
		}
	}
}
