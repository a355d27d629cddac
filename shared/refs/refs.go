// Package refs is the one image reference format durachat uses everywhere:
// "[image <name>]", where name is 16 lowercase hex digits.
package refs

import "regexp"

// NameLen is the number of hex digits in an image name.
const NameLen = 16

// RefLen is the length in bytes of every ref (all ASCII).
const RefLen = len("[image ]") + NameLen

var (
	exact   = regexp.MustCompile(`^\[image ([0-9a-f]{16})\]$`)
	anyRef  = regexp.MustCompile(`\[image ([0-9a-f]{16})\]`)
	nameRef = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// Ref returns the ref text for an image name.
func Ref(name string) string { return "[image " + name + "]" }

// RefName returns the image name when the whole of text is exactly one ref,
// with nothing around it: no space and no trailing newline. Otherwise "".
func RefName(text string) string {
	// regexp's $ matches only at the very end without the (?m) flag, but Go's
	// $ also refuses a trailing "\n", which is what the rule needs.
	if len(text) != RefLen {
		return ""
	}
	m := exact.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

// Names lists the image names text mentions, in first-seen order, each once.
func Names(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range anyRef.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// ValidName reports whether s is a well-formed image name.
func ValidName(s string) bool { return nameRef.MatchString(s) }
