package testenv

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ResidentMemory reads a process's resident memory and its peak so far
// (VmRSS and VmHWM of /proc/<pid>/status: Linux only), in bytes.
func ResidentMemory(t testing.TB, pid int) (rss, peak int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	if peak == 0 {
		t.Fatalf("/proc/%d/status has no VmHWM", pid)
	}
	return rss, peak
}

// HeapPeak samples this process's heap until stop is called, every
// millisecond, and stop returns the largest it saw, in bytes: the heap's
// objects (live, or garbage the collector has not yet swept), and all the
// runtime holds from the system (what it mapped less what it returned).
// A peak between two samples is missed: a bound the test asserts is
// still a bound on what was sampled.
func HeapPeak() (stop func() (objects, held uint64)) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	var objects, held uint64
	sample := func() {
		metrics.Read(samples)
		objects = max(objects, samples[0].Value.Uint64())
		held = max(held, samples[1].Value.Uint64()-samples[2].Value.Uint64())
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(done)
		<-ended
		sample()
		return objects, held
	}
}
