package refs

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestRefNameAcceptsOnlyAnExactRef(t *testing.T) {
	name := "0123456789abcdef"
	cases := []struct {
		text string
		want string
	}{
		{Ref(name), name},
		{Ref(name) + "\n", ""},
		{" " + Ref(name), ""},
		{Ref(name) + " ", ""},
		{"\n" + Ref(name), ""},
		{"[image 0123456789ABCDEF]", ""},
		{"[image 0123456789abcde]", ""},
		{"[image 0123456789abcdef0]", ""},
		{"see " + Ref(name), ""},
		{Ref(name) + Ref(name), ""},
		{"", ""},
		{"[image 0123456789abcdeg]", ""},
		{"(image 0123456789abcdef]", ""},
		{"[image 0123456789abcdef)", ""},
	}
	for _, c := range cases {
		if got := RefName(c.text); got != c.want {
			t.Errorf("RefName(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestNamesAreFirstSeenOrderWithoutDuplicates(t *testing.T) {
	a, b := "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	text := "x " + Ref(b) + " y " + Ref(a) + "\n" + Ref(b) + "[image nothex0000000000]"
	if got := Names(text); !slices.Equal(got, []string{b, a}) {
		t.Fatalf("Names = %v", got)
	}
	if got := Names("no refs"); got != nil {
		t.Fatalf("Names(no refs) = %v", got)
	}
}

// validName is the rule for a name as a pattern, for the fuzz target.
var validName = regexp.MustCompile(`^[0-9a-f]{16}$`)

func FuzzRefName(f *testing.F) {
	f.Add("[image 0123456789abcdef]")
	f.Add("[image 0123456789abcdef]\n")
	f.Add("text [image 0123456789abcdef] more")
	f.Fuzz(func(t *testing.T, s string) {
		name := RefName(s)
		if name != "" {
			if Ref(name) != s {
				t.Fatalf("RefName(%q) = %q but Ref gives %q", s, name, Ref(name))
			}
			if !ValidName(name) {
				t.Fatalf("invalid name %q", name)
			}
		}
		if ValidName(s) != validName.MatchString(s) {
			t.Fatalf("ValidName(%q) = %v", s, ValidName(s))
		}
		for _, n := range Names(s) {
			if !ValidName(n) || !strings.Contains(s, Ref(n)) {
				t.Fatalf("Names(%q) gave %q", s, n)
			}
		}
	})
}
