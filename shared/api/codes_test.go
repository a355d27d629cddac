package api

import (
	"testing"

	"github.com/durachat/durachat/client"
)

// The Go client names every code the API answers with, so a host can
// branch on each without spelling it.
func TestTheClientNamesEveryErrorCode(t *testing.T) {
	named := map[string]bool{}
	for _, c := range []string{
		client.CodeBadRequest, client.CodeUnauthorized, client.CodeForbidden, client.CodeNotFound,
		client.CodeMethodNotAllowed, client.CodeConflict, client.CodeDeleting, client.CodeExpired,
		client.CodeTooLarge, client.CodeInternal, client.CodeUnavailable,
	} {
		named[c] = true
	}
	for code := range answers {
		if !named[code] {
			t.Errorf("the API answers with code %q, which the client names no constant for", code)
		}
	}
	if len(named) != len(answers) {
		t.Errorf("the client names %d codes, the API answers with %d", len(named), len(answers))
	}
}
