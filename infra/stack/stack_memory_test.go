//go:build linux

package stack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/images/imagestest"
	"github.com/durachat/durachat/shared/testenv"
)

// In Lambda, a request must stay within half its function's memory,
// whatever a tenant sends. The deployed shape runs each function as
// Lambda does, with the template's MemorySize in its environment (from
// which it takes its decode budget and soft memory limit), so the peak
// resident memory of each function process under the attacks the local
// server's stress test sends, sized to Lambda's 6 MB, is the figure.
func TestInLambdaEachRequestStaysWithinHalfItsFunctionsMemory(t *testing.T) {
	t.Parallel() // each on a stack of its own
	// 3 execution environments per HTTP function (reserved, as the
	// template lets an operator), so each process sees several attacks.
	s := startStack(t, stack.Options{Params: map[string]string{
		"RestoreConcurrency": "3", "OffloadConcurrency": "3", "MemoryConcurrency": "3", "ViewConcurrency": "3"}})
	host := api{t: t, base: s.URL, token: s.DevToken}

	var stored struct{ Stored []string }
	status, raw := host.post("/v1/chats/c1/hooks/after-tool", imagestest.AfterTool(imagestest.BombPNG(64, 64)))
	if status != http.StatusOK || json.Unmarshal(raw, &stored) != nil || len(stored.Stored) != 1 {
		t.Fatalf("storing an image: %d %s", status, raw)
	}
	// 4 MiB of blocks: with the event's escaping, under Lambda's 6 MB.
	attacks := imagestest.Attacks(stored.Stored[0], 4<<20)

	for _, a := range attacks {
		status, raw := host.post("/v1/chats/c1/"+a.Route, a.Body)
		if !slices.Contains(a.Status, status) {
			t.Fatalf("%s: %d, want one of %v: %.300s", a.Name, status, a.Status, raw)
		}
	}
	// Every attack from 6 clients at once: with 3 environments per
	// function, each process sees several in turn. make test-long sends
	// them twice over.
	rounds := 1
	if testenv.Long() {
		rounds = 2
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6*rounds*len(attacks))
	for c := range 6 {
		wg.Go(func() {
			for round := range rounds {
				for i := range attacks {
					a := attacks[(i+c+round)%len(attacks)]
					if status, raw := host.post("/v1/chats/c1/"+a.Route, a.Body); !slices.Contains(a.Status, status) {
						errs <- fmt.Errorf("%s: %d: %.200s", a.Name, status, raw)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	for _, name := range []string{"RestoreFunction", "OffloadFunction", "MemoryFunction"} {
		f := s.Functions[name]
		limit := int64(f.Def.MemoryMB) << 20 / 2
		var peaks []string
		for _, emulator := range f.Emulators() {
			for _, pid := range children(t, emulator) {
				_, peak := testenv.ResidentMemory(t, pid)
				peaks = append(peaks, fmt.Sprintf("%d MB", peak>>20))
				if peak > limit {
					t.Errorf("%s: a function process peaked at %d MB, more than half its %d MB", name, peak>>20, f.Def.MemoryMB)
				}
			}
		}
		if len(peaks) == 0 {
			t.Fatalf("%s: no function process to measure", name)
		}
		t.Logf("RESULT %s (%d MB): peak RSS per execution environment %s (%d cold starts)", name, f.Def.MemoryMB, strings.Join(peaks, ", "), f.ColdStarts())
	}
}

// post sends a body as it is and returns the status and answer.
func (a api) post(path string, body []byte) (int, []byte) {
	a.t.Helper()
	var v json.RawMessage = body
	return a.do(http.MethodPost, path, v)
}

// children are the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after it.
		_, rest, ok := strings.Cut(string(data), ") ")
		fields := strings.Fields(rest)
		if !ok || len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	return out
}
