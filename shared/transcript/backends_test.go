package transcript

import (
	"testing"

	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// backend is a table and blob store to run a test over.
type backend struct {
	Name  string
	Table store.Table
	Blobs store.Blobs
}

// backends returns the stores every test runs over: the embedded stores,
// and the AWS adapters on local servers speaking the AWS protocols.
func backends(t testing.TB) []backend {
	t.Helper()
	var out []backend
	for _, be := range testenv.All(t) {
		out = append(out, backend{Name: be.Name, Table: be.Table, Blobs: be.Blobs})
	}
	return out
}
