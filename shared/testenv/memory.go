package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
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
