package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/store"
)

// naiveIndex is the character position of folded query in folded text,
// the reference a matcher must agree with.
func naiveIndex(text, query string) int {
	hay, needle := string(foldString(text)), string(foldString(query))
	at := strings.Index(hay, needle)
	if at < 0 {
		return -1
	}
	return utf8.RuneCountInString(hay[:at])
}

func TestTheMatcherFindsTheFirstMatchAsANaiveSearchDoes(t *testing.T) {
	tests := []struct{ text, query string }{
		{"", "a"},
		{"a", "a"},
		{"abc", "c"},
		{"aaaaab", "aab"},
		{"abababca", "ababca"},
		{"ÄÖÜ und äöü", "ÄÖü"},
		{"😀😀x😀", "X😀"},
		{"no match here", "nope"},
		{"abcabd abcabcabd", "abcabd"},
		{"\xffbad utf-8", "bad"},
		{strings.Repeat("a", 100) + "b", strings.Repeat("a", 50) + "b"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got, err := newMatcher(foldString(tt.query)).index(context.Background(), tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveIndex(tt.text, tt.query); got != want {
				t.Fatalf("index(%q, %q) = %d, want %d", tt.text, tt.query, got, want)
			}
		})
	}
}

func FuzzMatcher(f *testing.F) {
	f.Add("abababca", "ababca")
	f.Add("ÄÖÜ und äöü", "Üu")
	f.Add("aaaaaaab", "aab")
	f.Fuzz(func(t *testing.T, text, query string) {
		if query == "" {
			return
		}
		got, err := newMatcher(foldString(query)).index(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveIndex(text, query); got != want {
			t.Fatalf("index(%q, %q) = %d, want %d", text, query, got, want)
		}
	})
}

// endsMidway is a request whose client leaves while it runs: its context
// ends once its Err has been asked n times.
type endsMidway struct {
	context.Context
	asked, n int64
}

func (c *endsMidway) Err() error {
	if atomic.AddInt64(&c.asked, 1) > c.n {
		return context.Canceled
	}
	return nil
}

// The attack: a 9 MiB tool call of "a", and a query of 20,000
// "a" and a "b". Comparing at every position took about 9M x 20,000 steps,
// and went on after the client left; the search must stop once the
// request's context ends, wherever it is.
func TestSearchStopsWhenTheRequestEnds(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	f.append(t, "user", strings.Repeat("a", 9<<20))
	ctx := &endsMidway{Context: t.Context(), n: 20}
	_, err := f.m.Search(ctx, f.tenant, f.chat, wire.SearchArgs{Text: `"` + strings.Repeat("a", 20_000) + "b" + `"`})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("search after its request ended: %v, want it stopped with context.Canceled", err)
	}
	if ctx.asked > ctx.n+1 {
		t.Fatalf("the search went on after its context ended: asked %d times", ctx.asked)
	}
}

func TestSearchFindsALongQueryInALongText(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	long := strings.Repeat("a", 20_000)
	f.append(t, "user", strings.Repeat("a", 9<<20))
	f.append(t, "user", strings.Repeat("a", 1<<20)+"b"+long+"b")
	for _, c := range []struct {
		query string
		hit   string
	}{
		{long + "b", "id 1 "},
		{"a" + long + "b", "id 1 "},
		{long + "c", ""},
	} {
		res, err := f.m.Search(t.Context(), f.tenant, f.chat, wire.SearchArgs{Text: `"` + c.query + `"`})
		if err != nil || res.IsError {
			t.Fatalf("search: %v %+v", err, res)
		}
		text := res.Content[0].Text
		if c.hit == "" && !strings.HasPrefix(text, "no original entry") || c.hit != "" && (!strings.Contains(text, c.hit) || strings.Contains(text, "id 0 ")) {
			t.Fatalf("search for %d characters: %.200s", len(c.query), text)
		}
	}
}

// BenchmarkSearchAdversarial compares the attack (a query that
// matches 20,000 characters at every position before it fails) with a
// query that fails at its first character, over the same 9 MiB entry: a
// linear search takes about the same for both.
func BenchmarkSearchAdversarial(b *testing.B) {
	f := newFixture(b)
	f.m.search = true
	f.append(b, "user", strings.Repeat("a", 9<<20))
	for _, c := range []struct{ name, query string }{
		{"baseline", "b"},
		{"attack", strings.Repeat("a", 20_000) + "b"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := f.m.Search(b.Context(), f.tenant, f.chat, wire.SearchArgs{Text: `"` + c.query + `"`}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// searchText is the text of a search's answer, failing on an error.
func searchText(t *testing.T, f *fixture, args wire.SearchArgs) string {
	t.Helper()
	res, err := f.m.Search(t.Context(), f.tenant, f.chat, args)
	if err != nil || res.IsError {
		t.Fatalf("search %+v: %v %+v", args, err, res)
	}
	return res.Content[0].Text
}

func TestSearchRanksASentenceByItsStemmedWords(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	f.append(t, "user",
		"We went hiking in the Mountains last summer",
		"My sister runs a bakery downtown",
		"The weather is nice today",
		"Hiking boots are on sale",
	)
	text := searchText(t, f, wire.SearchArgs{Text: "When did they hike in the mountains?"})
	first, second, beside := strings.Index(text, "id 0 "), strings.Index(text, "id 3 "), strings.Index(text, "id 2 ")
	if first < 0 || second < 0 || first > second || beside < second {
		t.Fatalf("want entry 0 (hike, mountain) first and entry 3 (hike) before entry 2, which is only beside it:\n%s", text)
	}
	if !strings.Contains(text, "went hiking in the Mountains") {
		t.Errorf("no snippet around the matched words:\n%s", text)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "RUNNING"}); !strings.Contains(text, "id 1 ") {
		t.Errorf("running does not find runs:\n%s", text)
	}
}

func TestAQuotedPhraseMatchesAsWritten(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	f.append(t, "user", "a Red Car passed by", "the car was red")
	text := searchText(t, f, wire.SearchArgs{Text: `"red car"`})
	if !strings.Contains(text, "id 0 ") || strings.Contains(text, "id 1 ") {
		t.Fatalf("a quoted phrase matched out of order:\n%s", text)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "red car"}); !strings.Contains(text, "id 0 ") || !strings.Contains(text, "id 1 ") {
		t.Fatalf("words without quotes must match in any order:\n%s", text)
	}
}

func TestSearchReadsTheIndexNotTheLog(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	for i := range 1000 {
		f.log.add(f.chat, "user", fmt.Sprintf("entry %d about topic%d", i, i%50))
	}
	f.log.add(f.chat, "user", "the only needle")
	if err := f.m.Appended(t.Context(), f.ch(), 1001); err != nil {
		t.Fatal(err)
	}
	searchText(t, f, wire.SearchArgs{Text: "warm up"}) // seals the index
	f.log.mu.Lock()
	f.log.read = 0
	f.log.mu.Unlock()
	text := searchText(t, f, wire.SearchArgs{Text: "needle"})
	if !strings.Contains(text, "id 1000 ") {
		t.Fatalf("no hit:\n%s", text)
	}
	f.log.mu.Lock()
	read := f.log.read
	f.log.mu.Unlock()
	if read > segEntries+SearchHits {
		t.Errorf("a search read %d entries of the log, want at most the unindexed tail and the hits (%d)", read, segEntries+SearchHits)
	}
}

func TestAnErasedEntryLeavesTheSearchIndex(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	for i := range 2 * segEntries {
		text := fmt.Sprintf("entry %d", i)
		if i == 5 || i == 7 {
			text = "a trip to Zanzibar"
		}
		f.log.add(f.chat, "user", text)
	}
	if err := f.m.Appended(t.Context(), f.ch(), 2*segEntries); err != nil {
		t.Fatal(err)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "zanzibar"}); !strings.Contains(text, "id 5 ") {
		t.Fatalf("no hit before the erasure:\n%s", text)
	}
	erase := func(id int64) { f.erase(t, id) }
	erase(5)
	if text := searchText(t, f, wire.SearchArgs{Text: "zanzibar"}); strings.Contains(text, "id 5 ") || !strings.Contains(text, "id 7 ") {
		t.Fatalf("after erasing entry 5:\n%s", text)
	}
	erase(7)
	page, err := f.table.Query(t.Context(), store.Query{PK: f.ch().PK(), Prefix: searchPostPrefix + "zanzibar/"})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("the erased word is still in the index: %v %d items", err, len(page.Items))
	}
}

func TestALongQueryReadsTheIndexOfItsFirstWordsOnly(t *testing.T) {
	f := newFixture(t)
	f.m.search = true
	f.append(t, "user", "alpha beta", "omega")
	words := []string{"alpha"}
	for i := range 5000 {
		words = append(words, fmt.Sprintf("filler%d", i))
	}
	words = append(words, "omega")
	var calls atomic.Int64
	f.table.setFail(func(string, store.Key) error { calls.Add(1); return nil })
	text := searchText(t, f, wire.SearchArgs{Text: strings.Join(words, " ")})
	if calls := calls.Load(); !strings.Contains(text, "id 0 ") || calls > 100 {
		t.Fatalf("a 5,002-word query made %d table calls, want at most 100:\n%.300s", calls, text)
	}
}
