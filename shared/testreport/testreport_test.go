package testreport

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAGoRunShowsEachPackageAndTheOutputOfEachFailure(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"p/a"}`,
		`{"Action":"run","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:3: a log line of a test that passes\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK","Elapsed":1.5}`,
		`{"Action":"run","Package":"p/a","Test":"TestBad"}`,
		`{"Action":"output","Package":"p/a","Test":"TestBad","Output":"    a_test.go:9: got 1, want 2\n"}`,
		`{"Action":"fail","Package":"p/a","Test":"TestBad","Elapsed":0.25}`,
		`{"Action":"skip","Package":"p/a","Test":"TestLater","Elapsed":0}`,
		`{"Action":"fail","Package":"p/a","Elapsed":2}`,
		`{"Action":"skip","Package":"p/none","Elapsed":0}`,
		`{"ImportPath":"p/broken","Action":"build-output","Output":"broken.go:1:1: syntax error\n"}`,
		`{"Action":"fail","Package":"p/broken","Elapsed":0}`,
		`# a line that is not an event`,
	}, "\n")
	var out bytes.Buffer
	r, err := Go(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "--- FAIL: TestBad (250ms) in p/a\n    a_test.go:9: got 1, want 2\n" +
		"FAIL\tp/a\t2.0s\n" +
		"broken.go:1:1: syntax error\n" +
		"FAIL\tp/broken\t0.0s\n" +
		"# a line that is not an event\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if r.Packages != 1 || len(r.Tests) != 3 || !slices.Equal(r.Failed, []string{"p/a TestBad", "p/broken"}) {
		t.Errorf("run = %+v", r)
	}
}

// A test binary that dies inside a test ends none: the package fails with
// no failed test, and what the tests that never ended printed is the cause.
func TestAPackageWhoseBinaryDiesInATestShowsWhatThatTestPrinted(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestDone"}`,
		`{"Action":"output","Package":"p/a","Test":"TestDone","Output":"    a_test.go:2: fine\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestDone","Elapsed":0.1}`,
		`{"Action":"run","Package":"p/a","Test":"TestDies"}`,
		`{"Action":"output","Package":"p/a","Test":"TestDies","Output":"=== RUN   TestDies\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestDies","Output":"panic: boom\n"}`,
		`{"Action":"run","Package":"p/a","Test":"TestAlsoRunning"}`,
		`{"Action":"output","Package":"p/a","Test":"TestAlsoRunning","Output":"    a_test.go:7: waiting\n"}`,
		`{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t1.9s\n"}`,
		`{"Action":"fail","Package":"p/a","Elapsed":1.9}`,
	}, "\n")
	var out bytes.Buffer
	r, err := Go(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "--- DID NOT END: TestAlsoRunning in p/a\n    a_test.go:7: waiting\n" +
		"--- DID NOT END: TestDies in p/a\npanic: boom\n" +
		"FAIL\tp/a\t1.9s\n" +
		"FAIL\tp/a\t1.9s\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if !slices.Equal(r.Failed, []string{"p/a"}) {
		t.Errorf("failed = %q, want the package", r.Failed)
	}
}

func TestANodeRunCountsItsLeafTestsInEitherReporter(t *testing.T) {
	tests := []struct {
		reporter, output string
	}{
		{"tap", `TAP version 13
# Subtest: a suite
    # Subtest: logs once
    ok 1 - logs once
      ---
      duration_ms: 1200.5
      ...
    # Subtest: not yet
    ok 2 - not yet # SKIP needs a stack
      ---
      duration_ms: 0.1
      ...
    not ok 3 - zooms
      ---
      duration_ms: 30
      ...
    1..3
ok 1 - a suite
  ---
  duration_ms: 1300
  ...
# tests 3
`},
		{"spec", `▶ a suite
  ✔ logs once (1200.5ms)
  ﹣ not yet (0.1ms) # SKIP
  ✖ zooms (30ms)
✖ a suite (1300ms)
ℹ tests 3

✖ failing tests:

✖ zooms (30ms)
`},
	}
	for _, tt := range tests {
		t.Run(tt.reporter, func(t *testing.T) {
			r, err := Node("ts", strings.NewReader(tt.output))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Tests) != 3 || r.Tests[0].Elapsed != 1200500*time.Microsecond || !r.Tests[1].Skipped || !slices.Equal(r.Failed, []string{"ts zooms"}) {
				t.Errorf("run = %+v", r)
			}
		})
	}
}

func TestTheSummaryIsTheTenSlowestAndOneLine(t *testing.T) {
	var r Run
	r.Packages = 2
	for i := range 12 {
		r.Tests = append(r.Tests, Test{Suite: "p", Name: string(rune('a' + i)), Elapsed: time.Duration(i) * time.Second, Skipped: i == 0})
	}
	r.Tests = append(r.Tests, Test{Suite: "p", Name: "l/sub", Elapsed: time.Second}) // l has a subtest now
	var out bytes.Buffer
	Summary(&out, r, 95*time.Second)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := lines[1]; got != "    10.0s  p k" {
		t.Errorf("slowest = %q", got)
	}
	if got := lines[len(lines)-1]; got != "make test: 2 packages, 13 tests, 1 skipped, 0 failed, 95 s" {
		t.Errorf("summary = %q", got)
	}
	if strings.Count(out.String(), "  p ") != 10 {
		t.Errorf("not ten slowest:\n%s", out.String())
	}
}
