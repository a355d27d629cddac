package stack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports hands out the loopback ports of the emulators a stack starts. A
// port the kernel picks (port 0) and that is closed again to be handed on
// goes back to the kernel's ephemeral range, from which the next pick and
// every outgoing connection's own end are drawn: with a hundred emulators
// starting at once, two were given one port, so that one failed to start
// and the other took invocations meant for it. These ports come from
// below that range (Linux's default starts at 32768), are checked free
// when handed out, and are not handed out again until Release.
type Ports struct {
	mu        sync.Mutex
	low, high int // [low, high)
	next      int
	held      map[int]bool
}

// NewPorts hands out ports of [low, high), starting at a random one so
// that stacks in other processes seldom try the same ports first.
func NewPorts(low, high int) *Ports {
	return &Ports{low: low, high: high, next: low + rand.IntN(high-low), held: map[int]bool{}}
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
	for range p.high - p.low {
		port := p.next
		p.next++
		if p.next == p.high {
			p.next = p.low
		}
		if p.held[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // another program's
		}
		ln.Close()
		p.held[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("%w [%d, %d)", ErrNoFreePort, p.low, p.high)
}

// Release hands addr, from Take, out again.
func (p *Ports) Release(addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	n, _ := strconv.Atoi(port)
	p.mu.Lock()
	delete(p.held, n)
	p.mu.Unlock()
}
