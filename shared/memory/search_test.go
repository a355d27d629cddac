package memory

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/durachat/durachat/client/wire"
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
	_, err := f.m.Search(ctx, f.tenant, f.chat, wire.SearchArgs{Text: strings.Repeat("a", 20_000) + "b"})
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
		{"b" + long + "b", "id 1 "},
		{long + "c", ""},
	} {
		res, err := f.m.Search(t.Context(), f.tenant, f.chat, wire.SearchArgs{Text: c.query})
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
				if _, err := f.m.Search(b.Context(), f.tenant, f.chat, wire.SearchArgs{Text: c.query}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
