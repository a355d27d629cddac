package hooks

import (
	"testing"

	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

type backend struct {
	name   string
	blobs  store.Blobs
	linker store.Linker
}

// backends are the team's test backends: the embedded stores, and the AWS
// adapters on local AWS-protocol servers.
func backends(t testing.TB) []backend {
	t.Helper()
	var out []backend
	for _, b := range testenv.All(t) {
		out = append(out, backend{name: b.Name, blobs: b.Blobs, linker: b.Linker})
	}
	return out
}
