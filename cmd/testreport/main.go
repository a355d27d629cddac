// Command testreport is make test's report: `testreport go FILE` reads
// `go test -json` on stdin, prints each package's result and each failure
// as they come, keeps what it read in FILE and fails when a test did;
// `testreport summary SECONDS DIR` prints the ten slowest tests and one
// summary line of every run kept in DIR (FILE.json of testreport go, the
// output of node --test runs as NAME.log), SECONDS being the run's start
// in Unix seconds.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/testreport"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "go":
		r, err := testreport.Go(os.Stdin, os.Stdout)
		if err != nil {
			return err
		}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := os.WriteFile(args[1], data, 0o644); err != nil {
			return err
		}
		if len(r.Failed) > 0 {
			return fmt.Errorf("%d failed: %s", len(r.Failed), strings.Join(r.Failed, ", "))
		}
		return nil
	case len(args) == 3 && args[0] == "summary":
		start, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return fmt.Errorf("start %q: %w", args[1], err)
		}
		all, err := read(args[2])
		if err != nil {
			return err
		}
		testreport.Summary(os.Stdout, all, time.Since(time.Unix(start, 0)))
		return nil
	}
	return fmt.Errorf("usage: testreport go FILE < go-test-json | testreport summary START-UNIX-SECONDS DIR")
}

// read gathers the runs kept in dir.
func read(dir string) (testreport.Run, error) {
	var all testreport.Run
	entries, err := os.ReadDir(dir)
	if err != nil {
		return all, err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		var r testreport.Run
		switch filepath.Ext(e.Name()) {
		case ".json":
			data, err := os.ReadFile(path)
			if err != nil {
				return all, err
			}
			if err := json.Unmarshal(data, &r); err != nil {
				return all, fmt.Errorf("%s: %w", path, err)
			}
		case ".log":
			f, err := os.Open(path)
			if err != nil {
				return all, err
			}
			r, err = testreport.Node(strings.TrimSuffix(e.Name(), ".log"), f)
			f.Close()
			if err != nil {
				return all, err
			}
		default:
			continue
		}
		all.Add(r)
	}
	return all, nil
}
