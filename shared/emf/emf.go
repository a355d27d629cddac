// Package emf writes CloudWatch Embedded Metric Format lines: one JSON
// object a line on a function's log, which CloudWatch turns into metrics
// without an API call. Its only dependency is the standard library.
package emf

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Dimension is the dimension durachat's metrics carry: the name of the
// function that emitted them, which the alarms select.
const Dimension = "FunctionName"

// Counts is one line that counts 1 of each of Names in Namespace.
type Counts struct {
	Namespace string
	// Function is the Dimension's value; empty writes no dimension.
	Function string
	Names    []string
	// Fields are further properties of the line (in the log, not metrics).
	Fields map[string]any
}

// Write writes the line, stamped at, to w.
func (c Counts) Write(w io.Writer, at time.Time) error {
	dims := []string{}
	rec := make(map[string]any, len(c.Fields)+len(c.Names)+2)
	for k, v := range c.Fields {
		rec[k] = v
	}
	if c.Function != "" {
		dims = append(dims, Dimension)
		rec[Dimension] = c.Function
	}
	metrics := make([]map[string]string, len(c.Names))
	for i, n := range c.Names {
		metrics[i] = map[string]string{"Name": n, "Unit": "Count"}
		rec[n] = 1
	}
	rec["_aws"] = map[string]any{
		"Timestamp": at.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  c.Namespace,
			"Dimensions": [][]string{dims},
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
