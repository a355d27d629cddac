package wire_test

import (
	"reflect"
	"testing"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/hooks/wire"
	"github.com/durachat/durachat/shared/testenv"
)

// TestTheGoClientDecodesEveryFieldTheServerSends: the client's module
// keeps its own copy of this answer; it must stay this one.
func TestTheGoClientDecodesEveryFieldTheServerSends(t *testing.T) {
	testenv.SameWire(t, reflect.TypeFor[wire.Restoration](), reflect.TypeFor[client.Restoration]())
}
