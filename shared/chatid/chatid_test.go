package chatid_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

func TestAnIncarnationsKeysMeetNoOtherChats(t *testing.T) {
	legacy := chatid.Chat{Tenant: "a/b", ID: "x"}
	inc := chatid.Chat{Tenant: "a/b", ID: "x", Inc: "0123456789abcdef"}
	other := chatid.Chat{Tenant: "a/b", ID: "x-0123456789abcdef"}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"legacy partition is the home partition", legacy.PK(), store.ChatPK("a/b", "x")},
		{"legacy texts are the chat's", legacy.TextPrefix(), store.TextPrefix("a/b", "x")},
		{"incarnation partition", inc.PK(), store.ChatPK("a/b", "x~0123456789abcdef")},
		{"incarnation texts", inc.TextPrefix(), store.TextPrefix("a/b", "x~0123456789abcdef")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// No other chat id, nor another incarnation, shares a partition or a
	// text prefix with an incarnation.
	for _, c := range []chatid.Chat{legacy, other, {Tenant: "a/b", ID: "x", Inc: "fedcba9876543210"}} {
		if c.PK() == inc.PK() || strings.HasPrefix(c.TextPrefix(), inc.TextPrefix()) || strings.HasPrefix(inc.TextPrefix(), c.TextPrefix()) {
			t.Errorf("%+v meets the keys of %+v", c, inc)
		}
	}
}

func TestValidIncIsEmptyOrSixteenHexDigits(t *testing.T) {
	for _, tc := range []struct {
		inc  string
		want bool
	}{
		{"", true}, {"0123456789abcdef", true}, {"0123456789abcde", false},
		{"0123456789abcdeg", false}, {"0123456789abcdef0", false}, {"../../etc/passwd", false},
	} {
		if got := chatid.ValidInc(tc.inc); got != tc.want {
			t.Errorf("ValidInc(%q) = %v, want %v", tc.inc, got, tc.want)
		}
	}
}

func TestOpenRecordsOneIncarnationAndRetireEndsIt(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			r := chatid.New(b.Table)
			if c, recorded, err := r.Current(ctx, "t", "new"); err != nil || recorded || c.Inc != "" {
				t.Fatalf("Current of an unknown id = %+v %v %v, want incarnation \"\", none recorded", c, recorded, err)
			}
			// Concurrent first appends agree on one incarnation.
			var wg sync.WaitGroup
			got := make([]chatid.Chat, 8)
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := r.Open(ctx, "t", "new")
					if err != nil {
						t.Error(err)
					}
					got[i] = c
				}()
			}
			wg.Wait()
			first := got[0]
			if first.Inc == "" || !chatid.ValidInc(first.Inc) {
				t.Fatalf("Open of a new chat = %+v, want a fresh incarnation", first)
			}
			for _, c := range got {
				if c != first {
					t.Fatalf("concurrent opens got %+v and %+v", first, c)
				}
			}
			if ok, err := r.IsCurrent(ctx, first); !ok || err != nil {
				t.Fatalf("IsCurrent = %v %v", ok, err)
			}

			// Retiring another incarnation leaves this one.
			if err := r.Retire(ctx, chatid.Chat{Tenant: "t", ID: "new", Inc: "0000000000000000"}); err != nil {
				t.Fatal(err)
			}
			if ok, _ := r.IsCurrent(ctx, first); !ok {
				t.Fatal("retiring another incarnation removed the current one")
			}
			if err := r.Retire(ctx, first); err != nil {
				t.Fatal(err)
			}
			if ok, _ := r.IsCurrent(ctx, first); ok {
				t.Fatal("a retired incarnation is still current")
			}
			if _, err := b.Table.Get(ctx, chatid.Home("t", "new")); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the identity item after Retire: %v, want it gone", err)
			}
			next, err := r.Open(ctx, "t", "new")
			if err != nil || next.Inc == "" || next == first {
				t.Fatalf("Open after Retire = %+v %v, want a new incarnation", next, err)
			}
		})
	}
}

func TestAChatWithRowsButNoIdentityIsIncarnationEmpty(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			r := chatid.New(b.Table)
			// A chat written before incarnations: its rows, entry 0 first,
			// in the home partition.
			if err := b.Table.Create(ctx, store.Item{Key: store.Key{PK: store.ChatPK("t", "old"), SK: "e/0000000000000000"}, Body: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			c, err := r.Open(ctx, "t", "old")
			if err != nil || c != (chatid.Chat{Tenant: "t", ID: "old"}) {
				t.Fatalf("Open = %+v %v, want incarnation \"\"", c, err)
			}
			if _, recorded, err := r.Current(ctx, "t", "old"); !recorded || err != nil {
				t.Fatalf("after Open: recorded %v %v, want the old chat's identity written", recorded, err)
			}
		})
	}
}

func TestACorruptIdentityIsAnError(t *testing.T) {
	b := testenv.Embedded(t)
	ctx := context.Background()
	if err := b.Table.Create(ctx, store.Item{Key: chatid.Home("t", "c"), Body: []byte(`{"n":"../x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := chatid.New(b.Table).Current(ctx, "t", "c"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("Current = %v, want a corrupt identity named", err)
	}
	// Its deletion still removes it.
	if err := chatid.New(b.Table).Retire(ctx, chatid.Chat{Tenant: "t", ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Table.Get(ctx, chatid.Home("t", "c")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after Retire: %v", err)
	}
}

// The state kept beside the incarnation is written only over the item as
// it was read, is kept by Current and Open, and goes with the item when
// the incarnation is retired, even while others write it.
func TestAnIdentitysStateIsWrittenOverWhatWasReadAndRetiredWithIt(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			r := chatid.New(b.Table)
			rec, err := r.Read(ctx, "t", "c")
			if err != nil || rec.Recorded {
				t.Fatalf("Read of a new id = %+v %v", rec, err)
			}
			rec.State = []byte(`{"a":1}`)
			opened, err := r.Write(ctx, rec)
			if err != nil || !opened.Recorded || opened.Chat.Inc == "" {
				t.Fatalf("Write opening the id = %+v %v", opened, err)
			}
			if _, err := r.Write(ctx, rec); !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("a second opening over the same read = %v, want a condition failure", err)
			}
			if c, err := r.Open(ctx, "t", "c"); err != nil || c != opened.Chat {
				t.Fatalf("Open = %+v %v, want the incarnation written", c, err)
			}
			stale := opened
			opened.State = []byte(`{"a":2}`)
			if opened, err = r.Write(ctx, opened); err != nil {
				t.Fatal(err)
			}
			stale.State = []byte(`{"a":3}`)
			if _, err := r.Write(ctx, stale); !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("a write over an old read = %v, want a condition failure", err)
			}
			if got, err := r.Read(ctx, "t", "c"); err != nil || string(got.State) != `{"a":2}` || got.Chat != opened.Chat {
				t.Fatalf("Read = %+v %v", got, err)
			}

			// Writers racing Retire: the item goes all the same.
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						cur, err := r.Read(ctx, "t", "c")
						if err != nil || !cur.Recorded {
							return
						}
						cur.State = []byte(`{"a":` + string(rune('4'+i)) + `}`)
						_, _ = r.Write(ctx, cur)
					}
				}()
			}
			if err := r.Retire(ctx, opened.Chat); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if _, err := b.Table.Get(ctx, chatid.Home("t", "c")); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the identity item after Retire: %v, want it gone", err)
			}
		})
	}
}
