// Package textcut cuts strings to a byte budget without splitting a UTF-8
// character. It has no dependencies.
package textcut

import "unicode/utf8"

// Head returns the longest prefix of s of at most n bytes that ends on a
// character boundary; "" when n <= 0.
func Head(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Tail returns the longest suffix of s of at most n bytes that starts on a
// character boundary; "" when n <= 0.
func Tail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
