package infra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/durachat/durachat/shared/memory"
)

// metricKey is a metric as an alarm names it: namespace, name and the
// dimensions with their values, sorted.
func metricKey(namespace, name string, dims map[string]string) string {
	var parts []string
	for k, v := range dims {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return namespace + " " + name + " {" + strings.Join(parts, ",") + "}"
}

func alarmKey(a *cloudwatch.Alarm) string {
	dims := map[string]string{}
	for _, d := range a.Dimensions {
		dims[d.Name] = d.Value
	}
	return metricKey(deref(a.Namespace), deref(a.MetricName), dims)
}

// emittedByCompact is every metric the compact function writes, read back
// from the Embedded Metric Format lines of every build outcome, with the
// function name CloudFormation gives CompactFunction.
func emittedByCompact(t *testing.T) map[string]bool {
	t.Helper()
	var out bytes.Buffer
	for _, o := range memory.Outcomes {
		if err := memory.WriteBuildMetrics(&out, time.Unix(0, 0), "Ref:CompactFunction", o); err != nil {
			t.Fatal(err)
		}
	}
	emitted := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		var meta struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		}
		b, _ := json.Marshal(rec["_aws"])
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		for _, d := range meta.CloudWatchMetrics {
			for _, set := range d.Dimensions {
				dims := map[string]string{}
				for _, name := range set {
					dims[name] = fmt.Sprint(rec[name])
				}
				for _, m := range d.Metrics {
					if _, ok := rec[m.Name]; !ok {
						t.Errorf("metric %s declared without a value", m.Name)
					}
					emitted[metricKey(d.Namespace, m.Name, dims)] = true
				}
			}
		}
	}
	return emitted
}

func TestEveryAlarmWatchesAMetricThatIsEmitted(t *testing.T) {
	emitted := emittedByCompact(t)
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		queues := s.GetAllSQSQueueResources()
		for name, a := range s.GetAllCloudWatchAlarmResources() {
			key := alarmKey(a)
			switch ns := deref(a.Namespace); ns {
			case memory.MetricNamespace:
				if !emitted[key] {
					t.Errorf("%s watches %s, which the code never emits (it emits %v)", name, key, emitted)
				}
			case "AWS/SQS":
				q, _ := strings.CutPrefix(dimension(a, "QueueName"), "GetAtt:")
				q, _ = strings.CutSuffix(q, ".QueueName")
				if _, ok := queues[q]; !ok || len(a.Dimensions) != 1 ||
					!slices.Contains([]string{"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"}, deref(a.MetricName)) {
					t.Errorf("%s watches %s: not a queue metric of this stack", name, key)
				}
			case "AWS/Lambda":
				fn, _ := strings.CutPrefix(dimension(a, "FunctionName"), "Ref:")
				if _, ok := functions[fn]; !ok || len(a.Dimensions) != 1 || deref(a.MetricName) != "Errors" {
					t.Errorf("%s watches %s: not a function metric of this stack", name, key)
				}
			default:
				t.Errorf("%s watches namespace %q", name, ns)
			}
			_, withTopic := params["AlarmTopicArn"]
			if withTopic != (len(a.AlarmActions) == 1) {
				t.Errorf("%s: actions %v with topic %v", name, a.AlarmActions, withTopic)
			}
		}
	}
}

func dimension(a *cloudwatch.Alarm, name string) string {
	for _, d := range a.Dimensions {
		if d.Name == name {
			return d.Value
		}
	}
	return ""
}

// TestAnOutageRaisesAnAlarmWithinMinutes: a failing build is received
// every 10 s, so SQS's age metric and Lambda's Errors never see it; the
// compact function's own failed-build count does. An account-level
// denial and a crash loop have their own alarms.
func TestAnOutageRaisesAnAlarmWithinMinutes(t *testing.T) {
	s := load(t, defaults)
	tests := []struct {
		outage, metric string
		within         time.Duration
	}{
		{"builds failing", metricKey(memory.MetricNamespace, memory.MetricFailedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}), 15 * time.Minute},
		{"builds denied", metricKey(memory.MetricNamespace, memory.MetricDeniedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}), 5 * time.Minute},
		{"compact crash loop", metricKey("AWS/Lambda", "Errors", map[string]string{"FunctionName": "Ref:CompactFunction"}), 5 * time.Minute},
	}
	alarms := s.GetAllCloudWatchAlarmResources()
	for _, tt := range tests {
		t.Run(tt.outage, func(t *testing.T) {
			for _, a := range alarms {
				if alarmKey(a) != tt.metric {
					continue
				}
				period := time.Duration(*a.Period) * time.Second
				n := a.EvaluationPeriods
				if a.DatapointsToAlarm != nil {
					n = *a.DatapointsToAlarm
				}
				if deref(a.Statistic) != "Sum" || a.ComparisonOperator != "GreaterThanThreshold" || *a.Threshold != 0 {
					t.Errorf("fires on %s %s %v", deref(a.Statistic), a.ComparisonOperator, *a.Threshold)
				}
				if took := period * time.Duration(n); took > tt.within {
					t.Errorf("fires after %v, want within %v", took, tt.within)
				}
				if deref(a.TreatMissingData) != "notBreaching" {
					t.Errorf("missing data is %q: no failures is not an outage", deref(a.TreatMissingData))
				}
				return
			}
			t.Fatalf("no alarm watches %s", tt.metric)
		})
	}
}
