package memory

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"
)

// emf writes CloudWatch Embedded Metric Format lines: one JSON object per
// line whose "_aws" member tells CloudWatch which fields are metrics.
type emf struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// metricNamespace is the CloudWatch namespace of memory's metrics.
const metricNamespace = "durachat/memory"

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// build writes one build's metrics, dimensioned by outcome.
func (e *emf) build(outcome, modelName string, d time.Duration, attempts, sourceBytes, lineBytes, attached int) {
	if e == nil {
		return
	}
	rec := map[string]any{
		"_aws": map[string]any{
			"Timestamp": e.now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  metricNamespace,
				"Dimensions": [][]string{{"Outcome"}},
				"Metrics": []emfMetric{
					{Name: "Builds", Unit: "Count"},
					{Name: "BuildDuration", Unit: "Milliseconds"},
					{Name: "ModelAttempts", Unit: "Count"},
					{Name: "SourceBytes", Unit: "Bytes"},
					{Name: "LineBytes", Unit: "Bytes"},
					{Name: "ImagesAttached", Unit: "Count"},
				},
			}},
		},
		"Outcome":        outcome,
		"Model":          modelName,
		"Builds":         1,
		"BuildDuration":  d.Milliseconds(),
		"ModelAttempts":  attempts,
		"SourceBytes":    sourceBytes,
		"LineBytes":      lineBytes,
		"ImagesAttached": attached,
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// record logs one build as a structured record and emits its metrics.
func (m *Memory) record(ctx context.Context, chat string, n Node, outcome string, started time.Time, res produced, row nodeRow, err error) {
	d := m.now().Sub(started)
	line := len(Line(row.Text))
	if row.Mechanical {
		outcome = "mechanical"
	} else if outcome == "built" && row.Verbatim {
		outcome = "verbatim"
	}
	attrs := []slog.Attr{
		slog.String("chat", chat),
		slog.String("node", n.Label()),
		slog.Int("level", n.L),
		slog.Int64("index", n.I),
		slog.String("outcome", outcome),
		slog.Int("attempts", res.attempts),
		slog.String("model", res.model),
		slog.Int("sourceBytes", res.source),
		slog.Int("lineBytes", line),
		slog.Int64("ms", d.Milliseconds()),
	}
	if res.hasImage {
		attrs = append(attrs, slog.Group("images",
			slog.Int("named", res.images.Named),
			slog.Int("attached", res.images.Attached),
			slog.Int("skipped", res.images.Skipped),
			slog.Int("missing", res.images.Missing),
			slog.Int("alreadySeen", res.images.Resent),
			slog.Bool("namesOnly", res.images.NamesOnly)))
	}
	level := slog.LevelInfo
	if err != nil {
		// Every retry is recorded, quietly: the first failure of a node is
		// logged loudly by fail, and the status keeps the last error.
		level = slog.LevelDebug
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	m.logger.LogAttrs(ctx, level, "memory build", attrs...)
	m.metrics.build(outcome, res.model, d, res.attempts, res.source, line, res.images.Attached)
}
