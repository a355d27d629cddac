package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

func textMsgs(prefix string, n int) []pi.Message {
	out := make([]pi.Message, n)
	for i := range out {
		out[i] = pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(fmt.Sprintf("%s-%d", prefix, i))}}}
	}
	return out
}

func seq(first int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// TestRetriedAppendWritesOnce: the same receipt again returns the same ids
// and writes no row.
func TestRetriedAppendWritesOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		img := pngB64(t, 9, 8, 8)
		msgs := append(textMsgs("a", 3), imageMsg(t, "pic", img))
		ids, err := f.log.Append(ctx, tenant, chat, msgs, "r1")
		if err != nil {
			t.Fatal(err)
		}
		writes := len(f.table.writes())
		again, err := f.log.Append(ctx, tenant, chat, msgs, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, again) || !slices.Equal(ids, seq(0, 4)) {
			t.Fatalf("first %v, retry %v", ids, again)
		}
		if n := len(f.table.writes()); n != writes {
			t.Fatalf("the retry wrote %d items", n-writes)
		}
		if n := len(f.all(t)); n != 4 {
			t.Fatalf("%d entries, want 4", n)
		}
		// A later append goes after it.
		next, err := f.log.Append(ctx, tenant, chat, textMsgs("b", 1), "r2")
		if err != nil || !slices.Equal(next, []int64{4}) {
			t.Fatalf("next append: %v %v", next, err)
		}
	})
}

// TestConcurrentAppendsGetDistinctContiguousIds: 8 appenders of 10
// messages each get 80 distinct ids covering 0..79, each append's ids
// contiguous, and every message is logged once.
func TestConcurrentAppendsGetDistinctContiguousIds(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		const writers, each = 8, 10
		got := make([][]int64, writers)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				ids, err := f.log.Append(ctx, tenant, chat, textMsgs(fmt.Sprintf("w%d", w), each), fmt.Sprintf("w%d", w))
				if err != nil {
					errs <- err
				}
				got[w] = ids
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var all []int64
		for w, ids := range got {
			if len(ids) != each || ids[each-1]-ids[0] != each-1 {
				t.Errorf("writer %d got ids %v, not %d contiguous", w, ids, each)
			}
			all = append(all, ids...)
		}
		slices.Sort(all)
		if !slices.Equal(all, seq(0, writers*each)) {
			t.Fatalf("ids %v are not 0..%d", all, writers*each-1)
		}
		es := f.all(t)
		for w, ids := range got {
			for k, id := range ids {
				if want := fmt.Sprintf("w%d-%d", w, k); es[id].Text != want {
					t.Errorf("entry %d is %q, want %q", id, es[id].Text, want)
				}
			}
		}
	})
}

// TestConcurrentTwinsWithOneReceiptWriteOnce: copies of one request racing
// each other all get the same ids, and one set of rows exists.
func TestConcurrentTwinsWithOneReceiptWriteOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		// Another writer makes the twins contend for ids too.
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("x", 2), "x"); err != nil {
			t.Fatal(err)
		}
		const twins = 6
		got := make([][]int64, twins+1)
		var wg sync.WaitGroup
		for w := range twins {
			wg.Go(func() {
				ids, err := f.log.Append(ctx, tenant, chat, textMsgs("twin", 5), "same")
				if err != nil {
					t.Error(err)
				}
				got[w] = ids
			})
		}
		wg.Go(func() {
			ids, err := f.log.Append(ctx, tenant, chat, textMsgs("other", 3), "other")
			if err != nil {
				t.Error(err)
			}
			got[twins] = ids
		})
		wg.Wait()
		for w := 1; w < twins; w++ {
			if !slices.Equal(got[w], got[0]) {
				t.Fatalf("twin %d got %v, twin 0 got %v", w, got[w], got[0])
			}
		}
		es := f.all(t)
		if len(es) != 2+5+3 {
			t.Fatalf("%d entries, want 10: %q", len(es), texts(es))
		}
		for k, id := range got[0] {
			if es[id].Text != fmt.Sprintf("twin-%d", k) {
				t.Errorf("entry %d is %q", id, es[id].Text)
			}
		}
	})
}

// crashAfterClaim lets the first entry row write of a fresh chat (the
// claim) through and fails every later one: the state a process dying
// mid-append leaves. It counts the calls, not the writes that answered
// success: a claim whose answer is lost and whose retry finds the row
// its own still counts as the claim.
func crashAfterClaim(f *fixture) {
	var calls atomic.Int32
	f.table.setFail(func(op string, k store.Key) error {
		if op == "create" && strings.HasPrefix(k.SK, store.EntryPrefix) && calls.Add(1) > 1 {
			return outage(op)
		}
		return nil
	})
}

// TestCrashMidAppendIsNeverHalfVisible: an append that died after its
// first row is seen whole by readers (they finish it from its record), and
// a retry with the same receipt returns the same ids without duplicates.
func TestCrashMidAppendIsNeverHalfVisible(t *testing.T) {
	readers := map[string]func(t *testing.T, f *fixture) []Entry{
		"Entries": func(t *testing.T, f *fixture) []Entry { return f.all(t) },
		"Entry": func(t *testing.T, f *fixture) []Entry {
			var out []Entry
			for i := int64(0); ; i++ {
				e, err := f.log.Entry(context.Background(), f.cur(tenant, chat), i)
				if errors.Is(err, store.ErrNotFound) {
					return out
				}
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, e)
			}
		},
		"EntriesFromTheMiddle": func(t *testing.T, f *fixture) []Entry {
			es, err := f.log.Entries(context.Background(), f.cur(tenant, chat), 2, 100)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := f.log.Entries(context.Background(), f.cur(tenant, chat), 0, 2)
			return append(first, es...)
		},
		"RetrySameReceipt": func(t *testing.T, f *fixture) []Entry {
			ids, err := f.log.Append(context.Background(), tenant, chat, textMsgs("m", 4), "crash")
			if err != nil || !slices.Equal(ids, seq(0, 4)) {
				t.Fatalf("retry: %v %v", ids, err)
			}
			return f.all(t)
		},
	}
	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, f *fixture) {
				ctx := context.Background()
				crashAfterClaim(f)
				_, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 4), "crash")
				if !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("append during the outage: %v", err)
				}
				if n := len(f.entryRows()); n != 1 {
					t.Fatalf("%d entry rows written before the crash, want the claim only", n)
				}
				f.table.setFail(nil)
				es := read(t, f)
				if got, want := texts(es), []string{"user|m-0", "user|m-1", "user|m-2", "user|m-3"}; !slices.Equal(got, want) {
					t.Fatalf("read %q, want %q", got, want)
				}
				// Finishing is exact: later appends follow, nothing twice.
				ids, err := f.log.Append(ctx, tenant, chat, textMsgs("n", 1), "next")
				if err != nil || !slices.Equal(ids, []int64{4}) {
					t.Fatalf("next append: %v %v", ids, err)
				}
				if n := len(f.entryRows()); n != 5 {
					t.Fatalf("%d entry rows, want 5", n)
				}
			})
		})
	}
}

// TestOutageBeforeClaimLeavesNothing: when the table fails before an
// append's first row, nothing is visible, and the retry logs it once.
func TestOutageBeforeClaimLeavesNothing(t *testing.T) {
	failures := map[string]func(op string, k store.Key) error{
		"AllCalls": func(op string, k store.Key) error { return outage(op) },
		"ReceiptWrite": func(op string, k store.Key) error {
			if op == "create" && strings.HasPrefix(k.SK, store.ReceiptPrefix) {
				return outage(op)
			}
			return nil
		},
		"ClaimWrite": func(op string, k store.Key) error {
			if op == "create" && strings.HasPrefix(k.SK, store.EntryPrefix) {
				return outage(op)
			}
			return nil
		},
	}
	for name, fail := range failures {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, f *fixture) {
				ctx := context.Background()
				f.table.setFail(fail)
				_, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 3), "r")
				if !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("got %v, want an outage", err)
				}
				f.table.setFail(nil)
				if es := f.all(t); len(es) != 0 {
					t.Fatalf("visible after the failed append: %q", texts(es))
				}
				ids, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 3), "r")
				if err != nil || !slices.Equal(ids, seq(0, 3)) {
					t.Fatalf("retry: %v %v", ids, err)
				}
				if n := len(f.entryRows()); n != 3 {
					t.Fatalf("%d entry rows, want 3", n)
				}
			})
		})
	}
}

// TestImageStoreOutageWritesNoRow: an image that cannot be stored fails
// the append as an outage before any row is written.
func TestImageStoreOutageWritesNoRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		f.blobs.setFail(func(op, key string) error {
			if op == "put" {
				return outage(op)
			}
			return nil
		})
		_, err := f.log.Append(ctx, tenant, chat, []pi.Message{imageMsg(t, "pic", pngB64(t, 5, 8, 8))}, "r")
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("got %v, want an outage", err)
		}
		if w := f.table.writes(); len(w) != 0 {
			t.Fatalf("%d rows written, first %s", len(w), w[0].SK)
		}
	})
}

// writesNothing makes every write to the table and the blob store fail as
// an outage: an append that still succeeds, or fails for another reason,
// wrote nothing and stored no image.
func (f *fixture) writesNothing() {
	f.table.setFail(func(op string, k store.Key) error {
		if op == "create" || op == "update" {
			return outage(op)
		}
		return nil
	})
	f.blobs.setFail(func(op, key string) error {
		if op == "put" {
			return outage(op)
		}
		return nil
	})
}

// isReceiptConflict reports whether err is the 409 naming field "receipt".
func isReceiptConflict(err error) bool {
	var ie *fault.Error
	return errors.Is(err, ErrReceiptConflict) && errors.As(err, &ie) && ie.Field == "receipt"
}

// receiptRequest is an append that exercises every part of a request: an
// image, a tool call with arguments, fields passed through (nested ones
// included). Whitespace and key order differ from receiptRequestReordered.
const receiptRequest = `[
	{"role":"user","timestamp":1700000000000,"content":[{"type":"text","text":"look"},{"type":"image","mimeType":"image/png","data":"%s"}]},
	{"role":"assistant","api":"x","usage":{"input":10,"output":2},"content":[{"type":"text","text":"ok"},{"type":"toolCall","id":"c1","name":"ls","arguments":{"path":"/tmp"}}]}
]`

const receiptRequestReordered = `[{"content":[{"text":"look","type":"text"},{"data":"%s","type":"image","mimeType":"image/png"}],"timestamp":1700000000000,"role":"user"},` +
	`{"usage":{"input":10,"output":2},"content":[{"type":"text","text":"ok"},{"arguments":{"path":"/tmp"},"name":"ls","id":"c1","type":"toolCall"}],"role":"assistant","api":"x"}]`

// messages decodes a JSON list of pi messages.
func messages(t testing.TB, js string) []pi.Message {
	t.Helper()
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(js), &raws); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	out := make([]pi.Message, len(raws))
	for i, r := range raws {
		out[i] = msg(t, string(r))
	}
	return out
}

// TestReceiptRepeatedWithSameMessagesReturnsSameIds: once an append is
// complete, the same messages under its receipt, however the JSON is laid
// out, answer its ids from the record: nothing is written, no image is
// stored again.
func TestReceiptRepeatedWithSameMessagesReturnsSameIds(t *testing.T) {
	img := pngB64(t, 11, 8, 8)
	cases := []struct{ name, js string }{
		{"SameJSON", receiptRequest},
		{"KeysReorderedWhitespaceDropped", receiptRequestReordered},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		ids, err := f.log.Append(ctx, tenant, chat, messages(t, fmt.Sprintf(receiptRequest, img)), "done")
		if err != nil {
			t.Fatal(err)
		}
		writes := len(f.table.writes())
		f.writesNothing()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				again, err := f.log.Append(ctx, tenant, chat, messages(t, fmt.Sprintf(c.js, img)), "done")
				if err != nil || !slices.Equal(again, ids) {
					t.Fatalf("repeat: %v %v, want %v", again, err, ids)
				}
			})
		}
		if n := len(f.table.writes()); n != writes {
			t.Fatalf("the repeats wrote %d items", n-writes)
		}
		f.table.setFail(nil)
		if got, want := texts(f.all(t)), []string{"user|look\n[image " + images.Name(img) + "]", "talk|ok", `tool|ls {"path":"/tmp"}`}; !slices.Equal(got, want) {
			t.Fatalf("entries %q, want %q", got, want)
		}
	})
}

// TestReceiptReusedWithOtherMessagesAfterCompletionIsAConflict: a receipt
// names one request; after its append completed, any other request under
// it is refused as a conflict on "receipt", and nothing is written. That
// holds for a difference the entries do not show (a passed-through field).
func TestReceiptReusedWithOtherMessagesAfterCompletionIsAConflict(t *testing.T) {
	img, other := pngB64(t, 12, 8, 8), pngB64(t, 13, 8, 8)
	first := messages(t, fmt.Sprintf(receiptRequest, img))
	cases := []struct {
		name string
		msgs []pi.Message
	}{
		{"OtherText", textMsgs("other", 2)},
		{"OneMoreMessage", append(slices.Clone(first), textMsgs("more", 1)...)},
		{"FewerMessages", first[:1]},
		{"OtherImage", messages(t, fmt.Sprintf(receiptRequest, other))},
		{"OtherPassedThroughField", messages(t, strings.Replace(fmt.Sprintf(receiptRequest, img), `"output":2`, `"output":3`, 1))},
		{"OtherToolArguments", messages(t, strings.Replace(fmt.Sprintf(receiptRequest, img), `"/tmp"`, `"/var"`, 1))},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		if _, err := f.log.Append(ctx, tenant, chat, first, "done"); err != nil {
			t.Fatal(err)
		}
		writes := len(f.table.writes())
		f.writesNothing()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := f.log.Append(ctx, tenant, chat, c.msgs, "done")
				if !isReceiptConflict(err) {
					t.Fatalf("got %v, want a conflict on receipt", err)
				}
			})
		}
		if n := len(f.table.writes()); n != writes {
			t.Fatalf("the refused appends wrote %d items", n-writes)
		}
		f.table.setFail(nil)
		if n := len(f.all(t)); n != 3 {
			t.Fatalf("%d entries, want 3", n)
		}
	})
}

// failEntryCreates makes every entry row write fail: an append stops after
// its record, before its claim.
func failEntryCreates(f *fixture) {
	f.table.setFail(func(op string, k store.Key) error {
		if op == "create" && strings.HasPrefix(k.SK, store.EntryPrefix) {
			return outage(op)
		}
		return nil
	})
}

// TestReceiptReusedWithOtherMessagesWhileIncompleteIsAConflict: an append
// that died after its record, or after its claim, is not joined by other
// messages under its receipt, and the refusal writes nothing; the same
// messages still finish it.
func TestReceiptReusedWithOtherMessagesWhileIncompleteIsAConflict(t *testing.T) {
	crashes := map[string]func(f *fixture){"BeforeClaim": failEntryCreates, "AfterClaim": crashAfterClaim}
	for name, crash := range crashes {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, f *fixture) {
				ctx := context.Background()
				crash(f)
				if _, err := f.log.Append(ctx, tenant, chat, textMsgs("b", 2), "open"); !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("append during outage: %v", err)
				}
				f.table.setFail(nil)
				writes := len(f.table.writes())
				if _, err := f.log.Append(ctx, tenant, chat, textMsgs("c", 2), "open"); !isReceiptConflict(err) {
					t.Fatalf("got %v, want a conflict on receipt", err)
				}
				if n := len(f.table.writes()); n != writes {
					t.Fatalf("the refused append wrote %d items", n-writes)
				}
				ids, err := f.log.Append(ctx, tenant, chat, textMsgs("b", 2), "open")
				if err != nil || !slices.Equal(ids, seq(0, 2)) {
					t.Fatalf("retry: %v %v", ids, err)
				}
				if got := texts(f.all(t)); !slices.Equal(got, []string{"user|b-0", "user|b-1"}) {
					t.Fatalf("entries %q", got)
				}
			})
		})
	}
}

// TestReceiptRecordWithoutRequestDigestKeepsItsRule: records written
// before the request digest was kept answer their ids to any messages once
// complete, and refuse other entries while incomplete.
func TestReceiptRecordWithoutRequestDigestKeepsItsRule(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		ids, err := f.log.Append(ctx, tenant, chat, textMsgs("a", 2), "old")
		if err != nil {
			t.Fatal(err)
		}
		f.dropRequestDigest(t, "old")
		again, err := f.log.Append(ctx, tenant, chat, textMsgs("other", 5), "old")
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("complete old record: %v %v, want %v", again, err, ids)
		}

		failEntryCreates(f)
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("b", 2), "open"); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("append during outage: %v", err)
		}
		f.table.setFail(nil)
		f.dropRequestDigest(t, "open")
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("c", 2), "open"); !isReceiptConflict(err) {
			t.Fatalf("incomplete old record: got %v, want a conflict on receipt", err)
		}
		if ids, err := f.log.Append(ctx, tenant, chat, textMsgs("b", 2), "open"); err != nil || !slices.Equal(ids, seq(2, 2)) {
			t.Fatalf("retry of the incomplete old record: %v %v", ids, err)
		}
		if got := texts(f.all(t)); !slices.Equal(got, []string{"user|a-0", "user|a-1", "user|b-0", "user|b-1"}) {
			t.Fatalf("entries %q", got)
		}
	})
}

// dropRequestDigest rewrites a receipt's record as one written before
// request digests were kept.
func (f *fixture) dropRequestDigest(t testing.TB, receipt string) {
	t.Helper()
	ctx := context.Background()
	it, err := f.table.next.Get(ctx, store.Key{PK: f.cur(tenant, chat).PK(), SK: store.ReceiptSK(receipt)})
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(it.Body, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Request == "" {
		t.Fatalf("record of %q has no request digest to drop", receipt)
	}
	rec.Request = ""
	if it.Body, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	it.Version++
	if err := f.table.next.Update(ctx, it); err != nil {
		t.Fatal(err)
	}
}

// TestRequestDigestIsTheRequestsJSON: the digest ignores layout (key
// order, whitespace) and sees every value, passed-through ones included,
// and the shape content came in.
func TestRequestDigestIsTheRequestsJSON(t *testing.T) {
	const (
		user = `{"role":"user","content":"hi","timestamp":1,"meta":{"a":1}}`
		asst = `{"role":"assistant","content":[{"type":"image","mimeType":"image/png","data":"AAAA"},{"type":"toolCall","id":"1","name":"ls","arguments":{"p":"/"},"sig":"s"}]}`
	)
	base := "[" + user + "," + asst + "]"
	with := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	cases := []struct {
		name, js string
		same     bool
	}{
		{"Identical", base, true},
		{"KeysReordered", `[{"meta":{"a":1},"timestamp":1,"content":"hi","role":"user"},` +
			`{"content":[{"data":"AAAA","mimeType":"image/png","type":"image"},{"sig":"s","arguments":{"p":"/"},"name":"ls","id":"1","type":"toolCall"}],"role":"assistant"}]`, true},
		{"Whitespace", with(`"meta":{"a":1}`, "\"meta\" : {\n\t\"a\": 1 }"), true},
		{"ArgumentsWhitespace", with(`"arguments":{"p":"/"}`, `"arguments": { "p" : "/" }`), true},
		{"OtherText", with(`"hi"`, `"ho"`), false},
		{"OtherTimestamp", with(`"timestamp":1`, `"timestamp":2`), false},
		{"OtherNestedField", with(`{"a":1}`, `{"a":2}`), false},
		{"ExtraField", with(`"timestamp":1`, `"timestamp":1,"x":null`), false},
		{"OtherImageData", with(`"AAAA"`, `"AAAB"`), false},
		{"OtherArguments", with(`{"p":"/"}`, `{"p":"/tmp"}`), false},
		{"OtherBlockField", with(`"sig":"s"`, `"sig":"t"`), false},
		{"ContentAsBlocks", with(`"content":"hi"`, `"content":[{"type":"text","text":"hi"}]`), false},
		{"MessagesSwapped", "[" + asst + "," + user + "]", false},
		{"OneMessageMore", "[" + user + "," + user + "," + asst + "]", false},
	}
	want, err := requestDigest(messages(t, base))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := requestDigest(messages(t, c.js))
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) != c.same {
				t.Fatalf("digest %s vs %s, same=%v wanted", got, want, c.same)
			}
		})
	}
}

// TestRequestDigestRefusesARawFieldThatIsNotJSON: a message built in Go
// with a raw field that is not JSON is bad input naming the message.
func TestRequestDigestRefusesARawFieldThatIsNotJSON(t *testing.T) {
	m := textMsgs("x", 2)
	m[1].Extra = map[string]json.RawMessage{"usage": json.RawMessage(`{"input":`)}
	_, err := requestDigest(m)
	var ie *fault.Error
	if !errors.As(err, &ie) || ie.Field != "messages[1]" {
		t.Fatalf("got %v, want an input error naming messages[1]", err)
	}
}

// TestLargeMessagesReadBackIdentical: 2 MB messages are logged whole:
// split into pieces, or, for a tool call that is not split, moved out of
// the row; every row stays under the budget.
func TestLargeMessagesReadBackIdentical(t *testing.T) {
	big := strings.Repeat("0123456789abcdef<>&\"\n", 2<<20/21)
	cases := []struct {
		name string
		msg  pi.Message
		want func(es []Entry) string
		full string
	}{
		{"UserText", pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(big)}}}, nil, big},
		{"ToolCall", pi.Message{Role: pi.RoleAssistant, Content: pi.Content{Blocks: []pi.Block{{Type: pi.TypeToolCall, ID: "t", Name: "write", Arguments: []byte(`{"content":` + jsonString(big) + `}`)}}}}, nil, "write {\"content\":" + jsonString(big) + "}"},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				ch := fmt.Sprintf("big%d", i)
				if _, err := f.log.Append(ctx, tenant, ch, []pi.Message{c.msg, textMsgs("after", 1)[0]}, "r"); err != nil {
					t.Fatal(err)
				}
				es, err := f.log.Entries(ctx, f.cur(tenant, ch), 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				var sb strings.Builder
				for _, e := range es[:len(es)-1] {
					sb.WriteString(e.Text)
				}
				if sb.String() != c.full {
					t.Fatalf("read back %d bytes, want %d identical", sb.Len(), len(c.full))
				}
				if es[len(es)-1].Text != "after-0" {
					t.Fatalf("last entry %q", es[len(es)-1].Text)
				}
				for _, it := range f.table.writes() {
					if it.Size() > store.ItemBudget {
						t.Fatalf("row %s is %d bytes", it.SK, it.Size())
					}
				}
			})
		}
	})
}

// TestLenEndsWhereTheLastAppendEnds: the log's length is where the append
// of its highest entry ends, also while that append's later rows are not
// written yet (it died after its claim), and the next append claims the
// ids after it.
func TestLenEndsWhereTheLastAppendEnds(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		for i := range 3 {
			if _, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 2), fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		// The append of 3 claims 6; its rows at 7 and 8 fail.
		f.table.setFail(func(op string, k store.Key) error {
			if op == "create" && (k.SK == store.EntrySK(7) || k.SK == store.EntrySK(8)) {
				return outage(op)
			}
			return nil
		})
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("cut", 3), "cut"); err == nil {
			t.Fatal("the append whose later rows fail succeeded")
		}
		f.table.setFail(nil)
		if n, err := f.log.Len(ctx, f.cur(tenant, chat)); err != nil || n != 9 {
			t.Fatalf("Len %d %v, want 9: 3 appends of 2 and the claimed append of 3", n, err)
		}
		ids, err := f.log.Append(ctx, tenant, chat, textMsgs("next", 1), "next")
		if err != nil || !slices.Equal(ids, []int64{9}) {
			t.Fatalf("the next append got %v %v, want [9]", ids, err)
		}
	})
}

// TestReadsPastTheEnd: Entry past the end is ErrNotFound; Entries stops at
// the end; a fresh chat is empty.
func TestReadsPastTheEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		if n, err := f.log.Len(ctx, f.cur(tenant, chat)); n != 0 || err != nil {
			t.Fatalf("empty chat: %d %v", n, err)
		}
		if _, err := f.log.Entry(ctx, f.cur(tenant, chat), 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Entry(0) of an empty chat: %v", err)
		}
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 250), "r"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.Entry(ctx, f.cur(tenant, chat), 250); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Entry(250): %v", err)
		}
		es, err := f.log.Entries(ctx, f.cur(tenant, chat), 95, 400)
		if err != nil || len(es) != 155 || es[0].Text != "m-95" || es[154].Text != "m-249" {
			t.Fatalf("Entries(95, 400): %d entries, %v", len(es), err)
		}
		if es, err := f.log.Entries(ctx, f.cur(tenant, chat), 300, 310); err != nil || len(es) != 0 {
			t.Fatalf("Entries past the end: %d %v", len(es), err)
		}
		if _, err := f.log.Entries(ctx, f.cur(tenant, chat), 5, 4); err == nil {
			t.Fatal("a reversed range is accepted")
		}
		// Another tenant's chat of the same id is another log.
		if n, _ := f.log.Len(ctx, f.cur("other", chat)); n != 0 {
			t.Fatalf("another tenant sees %d entries", n)
		}
	})
}

// TestReadOutageIsUnavailable: readers pass a store outage on as one.
func TestReadOutageIsUnavailable(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		if _, err := f.log.Append(ctx, tenant, chat, textMsgs("m", 2), "r"); err != nil {
			t.Fatal(err)
		}
		f.table.setFail(func(op string, k store.Key) error { return outage(op) })
		if _, err := f.log.Len(ctx, f.cur(tenant, chat)); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Len: %v", err)
		}
		if _, err := f.log.Entry(ctx, f.cur(tenant, chat), 0); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Entry: %v", err)
		}
		if _, err := f.log.Entries(ctx, f.cur(tenant, chat), 0, 2); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Entries: %v", err)
		}
	})
}

// TestAnAppendNamingTooManyImagesIsRefusedBeforeAnythingIsWritten: each
// image an append names is tracked with store calls, so a message of
// nothing but refs is bad input, whichever blocks carry them.
func TestAnAppendNamingTooManyImagesIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	refsText := func(from, n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(refs.Ref(fmt.Sprintf("%016x", from+i)) + " ")
		}
		return b.String()
	}
	user := func(blocks ...pi.Block) pi.Message {
		return pi.Message{Role: pi.RoleUser, Content: pi.Content{Blocks: blocks}}
	}
	call := pi.Message{Role: pi.RoleAssistant, Content: pi.Content{Blocks: []pi.Block{{Type: pi.TypeToolCall, ID: "t", Name: "show", Arguments: []byte(fmt.Sprintf(`{"refs":%q}`, refsText(MaxNamedImages, 1)))}}}}
	cases := []struct {
		name string
		msgs []pi.Message
		ok   bool
	}{
		{"at the limit, a ref named twice counted once", []pi.Message{user(pi.TextBlock(refsText(0, MaxNamedImages) + refsText(0, 1)))}, true},
		{"one more in text", []pi.Message{user(pi.TextBlock(refsText(0, MaxNamedImages+1)))}, false},
		{"one more in a tool call's arguments", []pi.Message{user(pi.TextBlock(refsText(0, MaxNamedImages))), call}, false},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ch := fmt.Sprintf("named%d", i)
				_, err := f.log.Append(context.Background(), tenant, ch, c.msgs, "r")
				var ie *fault.Error
				if c.ok != (err == nil) || (!c.ok && (!errors.As(err, &ie) || ie.Field != "messages")) {
					t.Fatalf("append = %v, want ok=%v or an input error naming messages", err, c.ok)
				}
				if n, err := f.log.Len(context.Background(), f.cur(tenant, ch)); err != nil || (!c.ok && n != 0) {
					t.Fatalf("log length %d, %v after a refused append", n, err)
				}
			})
		}
	})
}
