package testenv

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// SameWire fails t unless the server's type and the Go client's copy of
// it encode alike: the same fields in the same order, with the same Go
// names, JSON keys and options, of the same kinds, all the way down. The
// types' own names may differ (the client's package has its own). A
// standard library type (time.Time) must be the same type on both sides.
func SameWire(t testing.TB, server, client reflect.Type) {
	t.Helper()
	for _, d := range wireDiff(server.Name(), server, client, map[[2]reflect.Type]bool{}) {
		t.Errorf("the client's %s differs from the server's %s: %s", client, server, d)
	}
}

func wireDiff(at string, a, b reflect.Type, seen map[[2]reflect.Type]bool) []string {
	if a == b || seen[[2]reflect.Type{a, b}] {
		return nil
	}
	seen[[2]reflect.Type{a, b}] = true
	if a.Kind() != b.Kind() {
		return []string{fmt.Sprintf("%s is a %s on the server, a %s in the client", at, a, b)}
	}
	if isStd(a) || isStd(b) {
		return []string{fmt.Sprintf("%s is %s on the server, %s in the client", at, a, b)}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Array && a.Len() != b.Len() {
			return []string{fmt.Sprintf("%s: arrays of %d and %d", at, a.Len(), b.Len())}
		}
		return wireDiff(at+"[]", a.Elem(), b.Elem(), seen)
	case reflect.Map:
		return append(wireDiff(at+"{key}", a.Key(), b.Key(), seen), wireDiff(at+"{}", a.Elem(), b.Elem(), seen)...)
	case reflect.Struct:
		var diffs []string
		if a.NumField() != b.NumField() {
			diffs = append(diffs, fmt.Sprintf("%s has %d fields on the server, %d in the client", at, a.NumField(), b.NumField()))
		}
		for i := range min(a.NumField(), b.NumField()) {
			fa, fb := a.Field(i), b.Field(i)
			path := at + "." + fa.Name
			switch {
			case fa.Name != fb.Name && !(fa.Anonymous && fb.Anonymous):
				diffs = append(diffs, fmt.Sprintf("%s: field %d is %s in the client", path, i, fb.Name))
			case fa.Tag.Get("json") != fb.Tag.Get("json"):
				diffs = append(diffs, fmt.Sprintf("%s: json tag %q on the server, %q in the client", path, fa.Tag.Get("json"), fb.Tag.Get("json")))
			case fa.Anonymous != fb.Anonymous:
				diffs = append(diffs, fmt.Sprintf("%s is embedded on one side only", path))
			default:
				diffs = append(diffs, wireDiff(path, fa.Type, fb.Type, seen)...)
			}
		}
		return diffs
	}
	return nil // the same basic kind
}

// isStd reports a named type of the standard library.
func isStd(t reflect.Type) bool {
	p := t.PkgPath()
	return p != "" && !strings.Contains(strings.SplitN(p, "/", 2)[0], ".")
}
