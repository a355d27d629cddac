package memory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	emfline "github.com/durachat/durachat/shared/emf"
	"github.com/durachat/durachat/shared/model"
)

// The CloudWatch metrics the compact function emits, in Embedded Metric
// Format: only those an alarm watches. Every build is in the log record;
// a metric is written only for a failed build, so a healthy stack writes
// none and pays for none.
const (
	// MetricNamespace is the CloudWatch namespace of memory's metrics.
	MetricNamespace = "durachat/memory"
	// MetricFailedBuilds counts builds that failed and wait their retry,
	// for any reason (an outage of the model or a store, a denial).
	MetricFailedBuilds = "FailedBuilds"
	// MetricDeniedBuilds counts the failed builds whose error is about the
	// account, not the node: access denied (IAM, a Marketplace
	// subscription), a bad key, an unknown model, no quota. They are
	// retried every 10 s until someone fixes the setting.
	MetricDeniedBuilds = "DeniedBuilds"
	// MetricDimension is the metrics' one dimension: the name of the
	// function that emits them, so two stacks in one account stay apart.
	MetricDimension = emfline.Dimension
)

// Outcomes of a build, as its log record names them.
var Outcomes = []string{"built", "verbatim", "mechanical", "failed", "denied"}

// deniedError reports whether a failed build's error is about the account
// rather than the node or an outage: a non-retryable model error of status
// 401, 402, 403, 404 or 429 (a 429 that is not throttling: no quota).
func deniedError(err error) bool {
	var me *model.Error
	if !errors.As(err, &me) || me.Retryable || me.Refused {
		return false
	}
	switch me.Status {
	case 401, 402, 403, 404, 429:
		return true
	}
	return false
}

// WriteBuildMetrics writes the Embedded Metric Format line of one build's
// outcome, emitted by function (no dimension when empty), to w. Outcomes
// no alarm watches write nothing.
func WriteBuildMetrics(w io.Writer, at time.Time, function, outcome string) error {
	var names []string
	switch outcome {
	case "failed":
		names = []string{MetricFailedBuilds}
	case "denied":
		names = []string{MetricFailedBuilds, MetricDeniedBuilds}
	default:
		return nil
	}
	return emfline.Counts{Namespace: MetricNamespace, Function: function, Names: names, Fields: map[string]any{"Outcome": outcome}}.Write(w, at)
}

// emf writes a build's metrics to w, one line at a time.
type emf struct {
	mu       sync.Mutex
	w        io.Writer
	now      func() time.Time
	function string
}

func (e *emf) build(outcome string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = WriteBuildMetrics(e.w, e.now(), e.function, outcome)
}

// record logs the build as a structured record and emits its metrics.
func (b *nodeBuild) record(ctx context.Context, outcome string, res produced, row nodeRow, err error) {
	m, chat, n := b.m, b.ch.ID, b.n
	d := m.now().Sub(b.started)
	line := len(Line(row.Text))
	if row.Mechanical {
		outcome = "mechanical"
	} else if outcome == "built" && row.Verbatim {
		outcome = "verbatim"
	}
	attrs := []slog.Attr{
		slog.String("chat", chat),
		slog.String("node", n.Label()),
		// Not "level": that key is the record's severity.
		slog.Int("nodeLevel", n.L),
		slog.Int64("nodeIndex", n.I),
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
			slog.Bool("namesOnly", res.images.NamesOnly),
			slog.Int("described", res.images.Described),
			slog.Int("describeFailed", res.images.DescribeFailed),
			slog.Int("describePending", res.images.Undescribed)))
	}
	level := slog.LevelInfo
	if err != nil {
		// Every retry is recorded, quietly: the first failure of a node is
		// logged loudly by fail, and the status keeps the last error.
		level = slog.LevelDebug
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	m.logger.LogAttrs(ctx, level, "memory build", attrs...)
	m.metrics.build(outcome)
}
