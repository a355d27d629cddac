package wire_test

import (
	"reflect"
	"testing"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/lifecycle/wire"
	"github.com/durachat/durachat/shared/testenv"
)

// TestTheGoClientDecodesEveryFieldTheServerSends: the client's module
// keeps its own copy of these answers; it must stay this one.
func TestTheGoClientDecodesEveryFieldTheServerSends(t *testing.T) {
	testenv.SameWire(t, reflect.TypeFor[wire.ChatList](), reflect.TypeFor[client.ChatList]())
	testenv.SameWire(t, reflect.TypeFor[wire.Progress](), reflect.TypeFor[client.DeleteProgress]())
	testenv.SameWire(t, reflect.TypeFor[wire.ImportResult](), reflect.TypeFor[client.ImportResult]())
	testenv.SameWire(t, reflect.TypeFor[wire.Retention](), reflect.TypeFor[client.Retention]())
}
