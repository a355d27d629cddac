package status_test

import (
	"reflect"
	"testing"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/memory/status"
	"github.com/durachat/durachat/shared/testenv"
)

// TestTheGoClientDecodesEveryFieldTheServerSends: the client's module
// keeps its own copy of these answers; it must stay this one.
func TestTheGoClientDecodesEveryFieldTheServerSends(t *testing.T) {
	testenv.SameWire(t, reflect.TypeFor[status.Chat](), reflect.TypeFor[client.Status]())
	testenv.SameWire(t, reflect.TypeFor[status.Tree](), reflect.TypeFor[client.Tree]())
	testenv.SameWire(t, reflect.TypeFor[status.Glance](), reflect.TypeFor[client.MemoryGlance]())
	states := map[string]string{
		status.NodeBuilt: client.NodeBuilt, status.NodeVerbatim: client.NodeVerbatim,
		status.NodeMechanical: client.NodeMechanical, status.NodeBuilding: client.NodeBuilding,
		status.NodeRetrying: client.NodeRetrying, status.NodeRefused: client.NodeRefused,
		status.NodeUnbuilt: client.NodeUnbuilt,
	}
	for server, c := range states {
		if server != c {
			t.Errorf("the node state %q is %q in the client", server, c)
		}
	}
}
