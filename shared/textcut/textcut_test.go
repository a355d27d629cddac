package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHeadAndTail(t *testing.T) {
	tests := []struct {
		name       string
		s          string
		n          int
		head, tail string
	}{
		{"empty", "", 3, "", ""},
		{"zero budget", "abc", 0, "", ""},
		{"negative budget", "abc", -1, "", ""},
		{"fits exactly", "abc", 3, "abc", "abc"},
		{"fits", "abc", 5, "abc", "abc"},
		{"ascii", "abcdef", 4, "abcd", "cdef"},
		{"two-byte character at the cut", "héllo", 2, "h", "lo"},
		{"two-byte character kept", "héllo", 3, "hé", "llo"},
		{"tail starts on a character", "aé", 2, "a", "é"},
		{"head ends on a character", "éa", 2, "é", "a"},
		{"three-byte characters", "日本語", 4, "日", "語"},
		{"no whole character fits", "日本語", 2, "", ""},
		{"two of three", "日本語", 6, "日本", "本語"},
		{"four-byte character dropped", "a😀b", 4, "a", "b"},
		{"four-byte character kept", "a😀b", 5, "a😀", "😀b"},
		{"invalid bytes count as characters", "\xff\xfeab", 3, "\xff\xfea", "\xfeab"},
	}
	for _, tt := range tests {
		if got := Head(tt.s, tt.n); got != tt.head {
			t.Errorf("%s: Head(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.head)
		}
		if got := Tail(tt.s, tt.n); got != tt.tail {
			t.Errorf("%s: Tail(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.tail)
		}
	}
}

func FuzzHeadAndTail(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Add("日本語のテキスト", 7)
	f.Add("a😀b😀c", 3)
	f.Add("\xff\xfe\xfd", 2)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		for _, cut := range []struct {
			name   string
			fn     func(string, int) string
			within func(s, part string) bool
		}{
			{"Head", Head, strings.HasPrefix},
			{"Tail", Tail, strings.HasSuffix},
		} {
			got := cut.fn(s, n)
			if !cut.within(s, got) {
				t.Fatalf("%s(%q, %d) = %q: not a part of the input", cut.name, s, n, got)
			}
			if len(got) > max(n, 0) {
				t.Fatalf("%s(%q, %d) = %q: %d bytes", cut.name, s, n, got, len(got))
			}
			if utf8.ValidString(s) && !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q: splits a character", cut.name, s, n, got)
			}
			// Longest: one more character would not fit.
			if len(got) < len(s) && n > 0 {
				var next int
				if cut.name == "Head" {
					_, next = utf8.DecodeRuneInString(s[len(got):])
				} else {
					_, next = utf8.DecodeLastRuneInString(s[:len(s)-len(got)])
				}
				if len(got)+next <= n && utf8.ValidString(s) {
					t.Fatalf("%s(%q, %d) = %q: one more character fits", cut.name, s, n, got)
				}
			}
		}
	})
}
