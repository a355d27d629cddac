package stack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Ports hands out the loopback ports of the emulators a stack starts. A
// port the kernel picks (port 0) and that is closed again to be handed on
// goes back to the kernel's ephemeral range, from which the next pick and
// every outgoing connection's own end are drawn: with a hundred emulators
// starting at once, two were given one port, so that one failed to start
// and the other took invocations meant for it. These ports come from
// below that range (Linux's default starts at 32768), are checked free
// when handed out, and are not handed out again until Release.
//
// Checked free is not enough between stacks: two stacks (in one process
// or in two) both saw a port free before either emulator listened on it,
// and one stack's invocations went to the other's emulator. So a port is
// held by an exclusive lock on a file named after it, in a directory all
// of a user's Ports share; the lock is an open file's, so it ends with
// Release or with the process, however the process ends.
type Ports struct {
	mu        sync.Mutex
	low, high int // [low, high)
	next      int
	dir       string
	held      map[int]*os.File // each held port's locked file
}

// NewPorts hands out ports of [low, high), starting at a random one so
// that stacks in other processes seldom try the same ports first.
func NewPorts(low, high int) *Ports {
	return newPorts(low, high, filepath.Join(os.TempDir(), "durachat-ports-"+strconv.Itoa(os.Getuid())))
}

func newPorts(low, high int, dir string) *Ports {
	return &Ports{low: low, high: high, next: low + rand.IntN(high-low), dir: dir, held: map[int]*os.File{}}
}

// DefaultPorts is the range a stack's emulators use: below the kernel's
// ephemeral ports, above the well-known and most registered services'.
func DefaultPorts() *Ports { return NewPorts(20000, 32768) }

// ErrNoFreePort: every port of the range is held or in use.
var ErrNoFreePort = errors.New("no free loopback port in the stack's range")

// Take returns a free loopback address, held until Release.
func (p *Ports) Take() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return "", fmt.Errorf("the ports' locks: %w", err)
	}
	for range p.high - p.low {
		port := p.next
		p.next++
		if p.next == p.high {
			p.next = p.low
		}
		if p.held[port] != nil {
			continue
		}
		lock, err := p.lock(port)
		if err != nil {
			return "", err
		}
		if lock == nil {
			continue // another stack's
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lock.Close()
			continue // another program's
		}
		ln.Close()
		p.held[port] = lock
		return addr, nil
	}
	return "", fmt.Errorf("%w [%d, %d)", ErrNoFreePort, p.low, p.high)
}

// lock takes port's lock file, or returns nil when another holds it.
func (p *Ports) lock(port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(p.dir, strconv.Itoa(port)), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("port %d's lock: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("port %d's lock: %w", port, err)
	}
	return f, nil
}

// Release hands addr, from Take, out again. Its lock file stays: removing
// it could let a Take that had just opened it and one that made it anew
// both hold the port.
func (p *Ports) Release(addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	n, _ := strconv.Atoi(port)
	p.mu.Lock()
	defer p.mu.Unlock()
	if lock := p.held[n]; lock != nil {
		lock.Close()
		delete(p.held, n)
	}
}
