package rawjson

import (
	"strconv"
	"unicode/utf8"
)

// InvalidUTF8 finds the first string of the JSON document raw, a value or
// a key, that holds bytes that are not UTF-8: JSON text is UTF-8 (RFC 8259
// §8.1), and encoding/json reads such bytes as U+FFFD without a word,
// while a Value keeps them. bad is false when raw is UTF-8 throughout
// (checked at memory speed first). path is the string's path from the
// document's root, each key as ".key" and each index as "[i]"
// (".messages[0].content"; "" for the root); a key's is the path of its
// object. raw that is not JSON is bad with path "".
func InvalidUTF8(raw Value) (path string, bad bool) {
	if utf8.Valid(raw) {
		return "", false
	}
	if !Valid(raw) {
		return "", true
	}
	_, path, _ = invalidIn(raw, skipSpace(raw, 0), "")
	return path, true
}

// invalidIn looks for bytes that are not UTF-8 in the value that starts at
// b[i], which is valid JSON: bad with the path of the string holding them,
// or else the index past the value. Each byte is looked at once, however
// deeply it is nested.
func invalidIn(b []byte, i int, path string) (end int, at string, bad bool) {
	switch b[i] {
	case '"':
		end = stringEnd(b, i)
		return end, path, !utf8.Valid(b[i:end])
	case '{', '[':
		closing := b[i] + 2 // '{'+2 is '}', '['+2 is ']'
		i = skipSpace(b, i+1)
		for n := 0; b[i] != closing; n++ {
			var at string
			if closing == '}' {
				keyEnd := stringEnd(b, i)
				if !utf8.Valid(b[i:keyEnd]) {
					return 0, path, true
				}
				at = path + "." + unquoteKey(b[i:keyEnd])
				i = skipSpace(b, skipSpace(b, keyEnd)+1) // past the colon
			} else {
				at = path + "[" + strconv.Itoa(n) + "]"
			}
			if i, at, bad = invalidIn(b, i, at); bad {
				return 0, at, true
			}
			if i = skipSpace(b, i); b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return i + 1, "", false
	}
	return valueEnd(b, i), "", false
}
