package stack

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A port is handed to one emulator at a time: never twice while held,
// never one that another program listens on, and again once released.
func TestAPortIsHandedToOneEmulatorAtATime(t *testing.T) {
	p := newPorts(20000, 32768, t.TempDir())
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

	// The busy port is one p holds, below the kernel's ephemeral ports:
	// one the kernel picked (port 0) could be given to another program's
	// connection once closed, and the part after busy.Close would fail
	// for a reason of that program's. The Ports below keep their locks
	// apart from p's, so only the listener can refuse it.
	picked, err := p.Take()
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", picked)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	small := newPorts(port, port+1, t.TempDir())
	if addr, err := small.Take(); !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("took %q (%v), a port another program listens on", addr, err)
	}

	free := newPorts(port, port+1, t.TempDir())
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

// takePortEnv makes the test binary a second process that tries to take
// one port (TestMain): "dir:port".
const takePortEnv = "DURACHAT_TEST_TAKE_PORT"

// takePort is that second process: it exits 0 when it was handed the port,
// 3 when the range had none free, 1 on another error.
func takePort(arg string) {
	i := strings.LastIndexByte(arg, ':')
	n, _ := strconv.Atoi(arg[i+1:])
	dir := arg[:i]
	if _, err := newPorts(n, n+1, dir).Take(); err != nil {
		if errors.Is(err, ErrNoFreePort) {
			os.Exit(3)
		}
		os.Exit(1)
	}
	os.Exit(0)
}

// A port one stack holds is handed to no other stack, in this process or
// another, until it is released: both saw it free before either emulator
// listened on it, and one stack's invocations went to the other's
// emulator.
func TestAPortIsHandedToOneStackAtATime(t *testing.T) {
	dir := t.TempDir()
	first := newPorts(20000, 32768, dir)
	addr, err := first.Take()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)

	second := newPorts(port, port+1, dir)
	if got, err := second.Take(); !errors.Is(err, ErrNoFreePort) {
		t.Fatalf("a second stack of this process was handed %q (%v), which the first holds", got, err)
	}
	other := func() int {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), takePortEnv+"="+dir+":"+p)
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := other(); code != 3 {
		t.Fatalf("a stack of another process: exit %d, want 3 (no free port): it was handed the port the first holds", code)
	}

	first.Release(addr)
	if got, err := second.Take(); err != nil || got != addr {
		t.Fatalf("after Release: %q %v, want %q", got, err, addr)
	}
	second.Release(addr)
	if code := other(); code != 0 {
		t.Fatalf("a stack of another process, once the port is released: exit %d, want 0", code)
	}
}
