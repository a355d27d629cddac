package stack

import (
	"errors"
	"net"
	"testing"
)

// A port is handed to one emulator at a time: never twice while held,
// never one that another program listens on, and again once released.
func TestAPortIsHandedToOneEmulatorAtATime(t *testing.T) {
	p := NewPorts(20000, 32768)
	seen := map[string]bool{}
	for range 500 {
		addr, err := p.Take()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice while held", addr)
		}
		seen[addr] = true
	}

	// The busy port comes from the stack's own range, below the kernel's
	// ephemeral ports: one the kernel picked (port 0) could be given to
	// another program's connection once closed, and the part after
	// busy.Close would fail for a reason of that program's.
	picked, err := NewPorts(20000, 32768).Take()
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", picked)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	small := NewPorts(port, port+1)
	if addr, err := small.Take(); !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("took %q (%v), a port another program listens on", addr, err)
	}

	free := NewPorts(port, port+1)
	busy.Close()
	addr, err := free.Take()
	if err != nil {
		t.Fatalf("the port once closed: %v", err)
	}
	if _, err := free.Take(); !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("a held port handed out again: %v", err)
	}
	free.Release(addr)
	if again, err := free.Take(); err != nil || again != addr {
		t.Fatalf("after Release: %q %v, want %q", again, err, addr)
	}
}
