// Package testreport reads what make test's runs print, Go's `go test
// -json` events and the Node test runner's TAP or spec output, and
// reports on them: a Go run as the packages pass or fail (a failed test
// with its output, the rest a line per package), and the whole run as its
// ten slowest tests and one summary line.
package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Test is one finished test.
type Test struct {
	Suite   string // the Go package, or the Node run's name
	Name    string
	Elapsed time.Duration
	Skipped bool
	Failed  bool
}

// Run is what one test run reported.
type Run struct {
	// Packages counts the Go packages or Node runs that had tests.
	Packages int
	Tests    []Test
	// Failed lists the failures: a test, or a package that did not build
	// or whose binary failed outside any test.
	Failed []string
}

// Add adds the tests of o to r.
func (r *Run) Add(o Run) {
	r.Packages += o.Packages
	r.Tests = append(r.Tests, o.Tests...)
	r.Failed = append(r.Failed, o.Failed...)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Go reads a `go test -json` stream from in and writes to out what a
// reader of the log needs as it comes: each package's result line, and
// the whole output of each failed test and of each package that failed
// outside a test. A line that is not an event (a build error printed
// before the tests ran) is written as it is.
func Go(in io.Reader, out io.Writer) (Run, error) {
	g := goRun{out: out, outputs: map[string]*strings.Builder{}, hasTests: map[string]bool{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		g.event(e)
	}
	if err := sc.Err(); err != nil {
		return g.run, fmt.Errorf("reading go test -json: %w", err)
	}
	return g.run, nil
}

// goRun is a Go run being read.
type goRun struct {
	out      io.Writer
	run      Run
	outputs  map[string]*strings.Builder // of each test or package, until it ends
	hasTests map[string]bool
}

func (g *goRun) event(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output", "build-fail":
		// A package that does not build: its errors as they come.
		fmt.Fprint(g.out, e.Output)
	case "output":
		b := g.outputs[key]
		if b == nil {
			b = &strings.Builder{}
			g.outputs[key] = b
		}
		// The lines a test starts and ends with say nothing a failure
		// report needs; the rest is kept up to a bound.
		if b.Len() < 1<<20 && !isFrame(e.Output) {
			b.WriteString(e.Output)
		}
	case "pass", "fail", "skip":
		text := ""
		if b := g.outputs[key]; b != nil {
			text = b.String()
			delete(g.outputs, key)
		}
		if e.Test != "" {
			g.testEnded(e, text)
		} else {
			g.packageEnded(e, text)
		}
	}
}

func (g *goRun) testEnded(e event, text string) {
	elapsed := time.Duration(e.Elapsed * float64(time.Second))
	g.hasTests[e.Package] = true
	g.run.Tests = append(g.run.Tests, Test{Suite: e.Package, Name: e.Test, Elapsed: elapsed, Skipped: e.Action == "skip", Failed: e.Action == "fail"})
	if e.Action == "fail" {
		g.run.Failed = append(g.run.Failed, e.Package+" "+e.Test)
		fmt.Fprintf(g.out, "--- FAIL: %s (%s) in %s\n%s", e.Test, elapsed.Round(time.Millisecond), e.Package, text)
	}
}

func (g *goRun) packageEnded(e event, text string) {
	if g.hasTests[e.Package] {
		g.run.Packages++
	}
	// A binary that dies in a test (a panic in a goroutine, an exit, a
	// signal) ends no test: what they printed is the failure's cause.
	unended := g.unended(e.Package)
	switch {
	case e.Action == "fail":
		for _, u := range unended {
			fmt.Fprintf(g.out, "--- DID NOT END: %s in %s\n%s", u.name, e.Package, u.text)
		}
		failedTests := slices.ContainsFunc(g.run.Failed, func(f string) bool { return strings.HasPrefix(f, e.Package+" ") })
		if !failedTests {
			g.run.Failed = append(g.run.Failed, e.Package)
			fmt.Fprint(g.out, text)
		}
		fmt.Fprintf(g.out, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
	case g.hasTests[e.Package]:
		fmt.Fprintf(g.out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
	}
}

// unendedTest is a test that began and never ended, and what it printed.
type unendedTest struct{ name, text string }

// unended takes the output of pkg's tests that began and never ended,
// in test name order.
func (g *goRun) unended(pkg string) []unendedTest {
	var out []unendedTest
	for key, b := range g.outputs {
		p, test, _ := strings.Cut(key, "\x00")
		if p != pkg || test == "" {
			continue
		}
		out = append(out, unendedTest{test, b.String()})
		delete(g.outputs, key)
	}
	slices.SortFunc(out, func(a, b unendedTest) int { return strings.Compare(a.name, b.name) })
	return out
}

// isFrame reports whether a line of test output is one the test runner
// frames every test with.
func isFrame(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP", "--- FAIL", "PASS\n", "FAIL\n", "ok  \t"} {
		if strings.HasPrefix(strings.TrimLeft(s, " "), p) {
			return true
		}
	}
	return false
}

var (
	// TAP: "ok 3 - name # SKIP why", then "duration_ms: 12.5" in its YAML.
	tapResult   = regexp.MustCompile(`^\s*(ok|not ok) \d+ - (.*?)(\s+# (SKIP|TODO).*)?$`)
	tapDuration = regexp.MustCompile(`^\s*duration_ms: ([0-9.]+)`)
	// spec: "✔ name (12.5ms)", "✖ name (3ms)", "﹣ name (0.1ms) # SKIP".
	specResult = regexp.MustCompile(`^\s*(✔|✖|﹣) (.*) \(([0-9.]+)ms\)( # SKIP.*)?$`)
)

// Node reads the output of one `node --test` run (TAP or spec) named
// suite. Only the leaves count as tests: a suite's line, which comes after
// its tests' and is indented less, is not one.
func Node(suite string, in io.Reader) (Run, error) {
	r := Run{}
	type result struct {
		indent int
		test   Test
	}
	var results []result
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if m := tapResult.FindStringSubmatch(line); m != nil {
			results = append(results, result{indent, Test{Suite: suite, Name: m[2], Skipped: m[4] == "SKIP", Failed: m[1] == "not ok"}})
			continue
		}
		if m := tapDuration.FindStringSubmatch(line); m != nil && len(results) > 0 && results[len(results)-1].test.Elapsed == 0 {
			ms, _ := strconv.ParseFloat(m[1], 64)
			results[len(results)-1].test.Elapsed = time.Duration(ms * float64(time.Millisecond))
			continue
		}
		if strings.TrimSpace(line) == "✖ failing tests:" {
			break // the spec reporter lists the failures again below
		}
		if m := specResult.FindStringSubmatch(line); m != nil {
			ms, _ := strconv.ParseFloat(m[3], 64)
			results = append(results, result{indent, Test{Suite: suite, Name: m[2], Elapsed: time.Duration(ms * float64(time.Millisecond)), Skipped: m[4] != "", Failed: m[1] == "✖"}})
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("reading %s: %w", suite, err)
	}
	// A result is a suite's when the one before it is indented more: its
	// tests came first.
	for i, res := range results {
		if i > 0 && results[i-1].indent > res.indent {
			continue
		}
		r.Tests = append(r.Tests, res.test)
		if res.test.Failed {
			r.Failed = append(r.Failed, suite+" "+res.test.Name)
		}
	}
	if len(r.Tests) > 0 {
		r.Packages = 1
	}
	return r, nil
}

// Summary writes the ten slowest tests of r and one line: packages,
// tests, skipped, failed and the run's seconds. A test with subtests is
// not among the slowest (its time is theirs, and its own set-up).
func Summary(out io.Writer, r Run, took time.Duration) {
	parents := map[string]bool{}
	for _, t := range r.Tests {
		for name := t.Name; strings.Contains(name, "/"); {
			name = name[:strings.LastIndex(name, "/")]
			parents[t.Suite+" "+name] = true
		}
	}
	slow := slices.DeleteFunc(slices.Clone(r.Tests), func(t Test) bool { return parents[t.Suite+" "+t.Name] })
	slices.SortStableFunc(slow, func(a, b Test) int { return int(b.Elapsed - a.Elapsed) })
	fmt.Fprintln(out, "\nThe ten slowest tests:")
	for _, t := range slow[:min(10, len(slow))] {
		fmt.Fprintf(out, "%8.1fs  %s %s\n", t.Elapsed.Seconds(), t.Suite, t.Name)
	}
	skipped := 0
	for _, t := range r.Tests {
		if t.Skipped {
			skipped++
		}
	}
	fmt.Fprintf(out, "\nmake test: %d packages, %d tests, %d skipped, %d failed, %.0f s\n", r.Packages, len(r.Tests), skipped, len(r.Failed), took.Seconds())
}
