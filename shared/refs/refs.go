// Package refs is the one image reference format durachat uses everywhere:
// "[image <name>]", where name is 16 lowercase hex digits.
package refs

import "regexp"

// NameLen is the number of hex digits in an image name.
const NameLen = 16

// RefLen is the length in bytes of every ref (all ASCII).
const RefLen = len("[image ]") + NameLen

var anyRef = regexp.MustCompile(`\[image ([0-9a-f]{16})\]`)

// prefix opens every ref.
const prefix = "[image "

// Ref returns the ref text for an image name.
func Ref(name string) string { return prefix + name + "]" }

// RefName returns the image name when the whole of text is exactly one ref,
// with nothing around it: no space and no trailing newline. Otherwise "".
// The name returned is a slice of text: a request may hold hundreds of
// thousands of ref blocks, and reading one allocates nothing.
func RefName(text string) string {
	if len(text) != RefLen || text[:len(prefix)] != prefix || text[RefLen-1] != ']' {
		return ""
	}
	if name := text[len(prefix) : RefLen-1]; ValidName(name) {
		return name
	}
	return ""
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
func ValidName(s string) bool {
	if len(s) != NameLen {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
