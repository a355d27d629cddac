package infra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/tokens"
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

// watched is one metric an alarm or a dashboard widget reads.
type watched struct {
	namespace, name string
	dims            map[string]string
}

func (w watched) key() string { return metricKey(w.namespace, w.name, w.dims) }

func cwDims(ds []cloudwatch.Alarm_Dimension) map[string]string {
	dims := map[string]string{}
	for _, d := range ds {
		dims[d.Name] = d.Value
	}
	return dims
}

// alarmMetrics is what an alarm reads: its one metric, or each metric its
// metric math reads.
func alarmMetrics(a *cloudwatch.Alarm) []watched {
	if a.MetricName != nil {
		return []watched{{deref(a.Namespace), deref(a.MetricName), cwDims(a.Dimensions)}}
	}
	var out []watched
	for _, q := range a.Metrics {
		if q.MetricStat != nil && q.MetricStat.Metric != nil {
			m := q.MetricStat.Metric
			out = append(out, watched{deref(m.Namespace), deref(m.MetricName), cwDims(m.Dimensions)})
		}
	}
	return out
}

func alarmKey(a *cloudwatch.Alarm) string {
	ms := alarmMetrics(a)
	if len(ms) != 1 {
		return fmt.Sprintf("%d metrics", len(ms))
	}
	return ms[0].key()
}

// emittedByCode is every metric the functions write, read back from their
// Embedded Metric Format lines (the compact function's for every build
// outcome), with the function names CloudFormation gives them.
func emittedByCode(t *testing.T) map[string]bool {
	t.Helper()
	var out bytes.Buffer
	for _, o := range memory.Outcomes {
		if err := memory.WriteBuildMetrics(&out, time.Unix(0, 0), "Ref:CompactFunction", o); err != nil {
			t.Fatal(err)
		}
	}
	// And what each HTTP function writes when it cannot read its tokens.
	for name, p := range functions {
		if p == config.Compact {
			continue
		}
		if err := tokens.WriteReadErrorMetric(&out, time.Unix(0, 0), "Ref:"+name); err != nil {
			t.Fatal(err)
		}
	}
	return emfMetrics(t, out.Bytes())
}

// emfMetrics reads the metrics Embedded Metric Format lines declare, each
// under every dimension set it is declared with.
func emfMetrics(t *testing.T, lines []byte) map[string]bool {
	t.Helper()
	emitted := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
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

// awsEmitted is what AWS emits in each namespace the stack's alarms and
// dashboard read: the metric names, the one dimension they are read by,
// and the type of the stack resource its value must name, as the
// placeholder prefix and suffix around the logical id. (API Gateway: the
// HTTP API metrics by ApiId; Lambda: by FunctionName; SQS: by QueueName.)
var awsEmitted = map[string]struct {
	metrics        []string
	dimension      string
	resourceType   string
	prefix, suffix string
}{
	"AWS/ApiGateway": {[]string{"Count", "4xx", "5xx", "Latency", "IntegrationLatency", "DataProcessed"}, "ApiId", "AWS::ApiGatewayV2::Api", "Ref:", ""},
	"AWS/Lambda":     {[]string{"Invocations", "Errors", "Throttles", "Duration", "ConcurrentExecutions"}, "FunctionName", "AWS::Serverless::Function", "Ref:", ""},
	"AWS/SQS": {[]string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible", "ApproximateAgeOfOldestMessage"},
		"QueueName", "AWS::SQS::Queue", "GetAtt:", ".QueueName"},
}

// checkEmitted reports a metric that neither the code nor AWS emits for a
// resource of this stack.
func checkEmitted(t *testing.T, s stack, where string, m watched, emitted map[string]bool) {
	t.Helper()
	if m.namespace == memory.MetricNamespace || m.namespace == tokens.MetricNamespace {
		if !emitted[m.key()] {
			t.Errorf("%s reads %s, which the code never emits (it emits %v)", where, m.key(), slices.Sorted(maps.Keys(emitted)))
		}
		return
	}
	aws, ok := awsEmitted[m.namespace]
	if !ok {
		t.Errorf("%s reads namespace %q", where, m.namespace)
		return
	}
	if !slices.Contains(aws.metrics, m.name) {
		t.Errorf("%s reads %s, which %s does not emit", where, m.key(), m.namespace)
	}
	v, ok := m.dims[aws.dimension]
	if len(m.dims) != 1 || !ok {
		t.Errorf("%s reads %s: %s metrics are read by %s alone", where, m.key(), m.namespace, aws.dimension)
		return
	}
	logical, okp := strings.CutPrefix(v, aws.prefix)
	logical, oks := strings.CutSuffix(logical, aws.suffix)
	resources, _ := s.raw["Resources"].(map[string]any)
	res, _ := resources[logical].(map[string]any)
	if !okp || !oks || res["Type"] != aws.resourceType {
		t.Errorf("%s reads %s: %s=%s is not a %s of this stack", where, m.key(), aws.dimension, v, aws.resourceType)
	}
}

func TestEveryAlarmWatchesAMetricThatIsEmitted(t *testing.T) {
	emitted := emittedByCode(t)
	for _, params := range []map[string]any{defaults, allOptions, tokensInSSM} {
		s := load(t, params)
		for name, a := range s.GetAllCloudWatchAlarmResources() {
			ms := alarmMetrics(a)
			if len(ms) == 0 {
				t.Errorf("%s reads no metric", name)
			}
			for _, m := range ms {
				checkEmitted(t, s, name, m, emitted)
			}
		}
	}
}

// topicOf is the topic the alarms notify with params: the stack's own, or
// AlarmTopicArn.
func topicOf(params map[string]any) string {
	if arn, ok := params["AlarmTopicArn"].(string); ok && arn != "" {
		return arn
	}
	return "Ref:AlarmTopic"
}

func TestEveryAlarmNotifiesTheTopic(t *testing.T) {
	for _, params := range []map[string]any{defaults, allOptions, alarmEmail} {
		s := load(t, params)
		conds := conditionValues(t, params)
		topic := topicOf(params)
		alarms := s.GetAllCloudWatchAlarmResources()
		if len(alarms) == 0 {
			t.Fatal("no alarms")
		}
		for name, a := range alarms {
			if !slices.Equal(a.AlarmActions, []string{topic}) || !slices.Equal(a.OKActions, []string{topic}) {
				t.Errorf("%s notifies %v on alarm and %v on OK, want %s on both", name, a.AlarmActions, a.OKActions, topic)
			}
			if a.ActionsEnabled != nil && !*a.ActionsEnabled {
				t.Errorf("%s has its actions turned off", name)
			}
		}
		own, err := s.GetSNSTopicWithName("AlarmTopic")
		if err != nil {
			t.Fatal(err)
		}
		if c := own.AWSCloudFormationCondition; conds[c] != (topic == "Ref:AlarmTopic") {
			t.Errorf("with %v: the stack's own topic is made: %v (condition %q), want it only without AlarmTopicArn", params, conds[c], c)
		}
		sub, err := s.GetSNSSubscriptionWithName("AlarmEmailSubscription")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.GetAllSNSSubscriptionResources()) != 1 || sub.Protocol != "email" || sub.TopicArn != "Ref:AlarmTopic" {
			t.Errorf("subscription %+v, want one, by email, to the stack's own topic", sub)
		}
		email, _ := params["AlarmEmail"].(string)
		if made := conds[sub.AWSCloudFormationCondition]; made != (email != "") || (made && deref(sub.Endpoint) != email) {
			t.Errorf("with %v: the email subscription is made: %v, to %q", params, made, deref(sub.Endpoint))
		}
	}
}

// TestAnOutageRaisesAnAlarmWithinMinutes: a failing build is received
// every 10 s, so SQS's age metric and Lambda's Errors never see it; the
// compact function's own failed-build count does. An account-level
// denial and a crash loop of any function have their own alarms, and so do
// throttling and a function running into its timeout.
func TestAnOutageRaisesAnAlarmWithinMinutes(t *testing.T) {
	s := load(t, defaults)
	lambda := func(metric, fn string) string {
		return metricKey("AWS/Lambda", metric, map[string]string{"FunctionName": "Ref:" + fn})
	}
	type outage struct {
		outage, metric string
		within         time.Duration
		statistic      string
		threshold      float64
	}
	tests := []outage{
		{"builds failing", metricKey(memory.MetricNamespace, memory.MetricFailedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}), 15 * time.Minute, "Sum", 0},
		{"builds denied", metricKey(memory.MetricNamespace, memory.MetricDeniedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}), 5 * time.Minute, "Sum", 0},
		{"a message in the DLQ", metricKey("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": "GetAtt:BuildDeadLetterQueue.QueueName"}), 5 * time.Minute, "Maximum", 0},
	}
	for _, fn := range slices.Sorted(maps.Keys(functions)) {
		timeout := deref(s.function(t, fn).Timeout)
		if timeout == 0 {
			t.Fatalf("%s has no Timeout", fn)
		}
		tests = append(tests,
			outage{fn + " crash loop", lambda("Errors", fn), 5 * time.Minute, "Sum", 0},
			outage{fn + " throttled", lambda("Throttles", fn), 5 * time.Minute, "Sum", 0},
			// Within 10% of the timeout: what Lambda would cut off next.
			outage{fn + " near its timeout", lambda("Duration", fn), 15 * time.Minute, "Maximum", float64(timeout) * 1000 * 0.9},
		)
	}
	// A tokens secret that cannot be read or does not parse: its alarms
	// exist only when ApiTokensSecret is set, so they are read from a
	// stack with it.
	withTokens := load(t, allOptions)
	alarms := withTokens.GetAllCloudWatchAlarmResources()
	for name, p := range functions {
		if p == config.Compact {
			continue
		}
		tests = append(tests, outage{name + " cannot read its tokens",
			metricKey(tokens.MetricNamespace, tokens.MetricReadErrors, map[string]string{tokens.MetricDimension: "Ref:" + name}), 5 * time.Minute, "Sum", 0})
		a, err := withTokens.GetCloudWatchAlarmWithName(strings.TrimSuffix(name, "Function") + "TokensAlarm")
		if err != nil || a.AWSCloudFormationCondition != "UseTokensSecret" || conditionValues(t, defaults)["UseTokensSecret"] {
			t.Errorf("%s's tokens alarm (%v) is not made exactly when ApiTokensSecret is set", name, err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.outage, func(t *testing.T) {
			var found []string
			for name, a := range alarms {
				if alarmKey(a) != tt.metric {
					continue
				}
				found = append(found, name)
				period := time.Duration(deref(a.Period)) * time.Second
				n := a.EvaluationPeriods
				if a.DatapointsToAlarm != nil {
					n = *a.DatapointsToAlarm
				}
				if deref(a.Statistic) != tt.statistic || a.ComparisonOperator != "GreaterThanThreshold" || deref(a.Threshold) != tt.threshold {
					t.Errorf("%s fires on %s %s %v, want %s above %v", name, deref(a.Statistic), a.ComparisonOperator, deref(a.Threshold), tt.statistic, tt.threshold)
				}
				if took := period * time.Duration(n); took == 0 || took > tt.within {
					t.Errorf("%s fires after %v, want within %v", name, took, tt.within)
				}
				if deref(a.TreatMissingData) != "notBreaching" {
					t.Errorf("%s: missing data is %q: no datapoint is no outage", name, deref(a.TreatMissingData))
				}
			}
			if len(found) != 1 {
				t.Fatalf("alarms on %s: %v, want one", tt.metric, found)
			}
		})
	}
}

// The API's 5xx alarm is a rate: 5xx answers over requests of this stack's
// API, in the same periods, above a few percent, and quiet periods count
// as healthy.
func TestAPIServerErrorRateRaisesAnAlarm(t *testing.T) {
	s := load(t, defaults)
	a, err := s.GetCloudWatchAlarmWithName("ApiServerErrorsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	api := map[string]string{"ApiId": "Ref:HttpApi"}
	byID := map[string]cloudwatch.Alarm_MetricDataQuery{}
	var returned []string
	for _, q := range a.Metrics {
		byID[q.Id] = q
		if q.ReturnData == nil || *q.ReturnData {
			returned = append(returned, q.Id)
		}
	}
	read := func(id string) (string, int) {
		q, ok := byID[id]
		if !ok || q.MetricStat == nil || q.MetricStat.Metric == nil {
			return "", 0
		}
		m := q.MetricStat.Metric
		if q.MetricStat.Stat != "Sum" {
			return "stat " + q.MetricStat.Stat, 0
		}
		return metricKey(deref(m.Namespace), deref(m.MetricName), cwDims(m.Dimensions)), q.MetricStat.Period
	}
	errs, p1 := read("errors")
	reqs, p2 := read("requests")
	if errs != metricKey("AWS/ApiGateway", "5xx", api) || reqs != metricKey("AWS/ApiGateway", "Count", api) || p1 != p2 || p1 == 0 {
		t.Fatalf("the rate reads %q (%d s) over %q (%d s), want the API's 5xx Sum over its Count Sum in one period", errs, p1, reqs, p2)
	}
	if len(returned) != 1 {
		t.Fatalf("the alarm returns %v, want one expression", returned)
	}
	expr := deref(byID[returned[0]].Expression)
	if !strings.Contains(expr, "100 * errors / requests") || !strings.Contains(expr, "IF(requests >=") {
		t.Errorf("expression %q, want the percentage of 5xx answers, 0 in quiet periods", expr)
	}
	if th := deref(a.Threshold); a.ComparisonOperator != "GreaterThanThreshold" || th <= 0 || th > 10 {
		t.Errorf("fires on %s %v %%, want a rate above a few percent", a.ComparisonOperator, th)
	}
	if deref(a.TreatMissingData) != "notBreaching" {
		t.Errorf("missing data is %q", deref(a.TreatMissingData))
	}
}

// dashboardWidget is one widget of the dashboard body.
type dashboardWidget struct {
	Type       string
	Properties struct {
		Title   string
		Query   string
		Metrics [][]any
	}
}

func dashboard(t *testing.T, s stack) []dashboardWidget {
	t.Helper()
	resources, _ := s.raw["Resources"].(map[string]any)
	d, _ := resources["Dashboard"].(map[string]any)
	if d["Type"] != "AWS::CloudWatch::Dashboard" {
		t.Fatal("no Dashboard of type AWS::CloudWatch::Dashboard")
	}
	props, _ := d["Properties"].(map[string]any)
	body, ok := props["DashboardBody"].(string)
	if !ok {
		t.Fatalf("DashboardBody is %T, want the JSON text", props["DashboardBody"])
	}
	var doc struct{ Widgets []dashboardWidget }
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("DashboardBody is not JSON: %v", err)
	}
	return doc.Widgets
}

// widgetMetrics reads a metric widget's metrics: [namespace, name,
// dimension, value, ..., {options}]. The "..." shorthand is not used, so
// that each line names its metric in full.
func widgetMetrics(t *testing.T, w dashboardWidget) []watched {
	t.Helper()
	var out []watched
	for _, line := range w.Properties.Metrics {
		var parts []string
		for _, p := range line {
			if s, ok := p.(string); ok {
				parts = append(parts, s)
			}
		}
		if len(parts) < 2 || len(parts)%2 != 0 || slices.Contains(parts, "...") || slices.Contains(parts, ".") {
			t.Errorf("widget %q: metric %v is not namespace, name and dimension pairs", w.Properties.Title, line)
			continue
		}
		dims := map[string]string{}
		for i := 2; i < len(parts); i += 2 {
			dims[parts[i]] = parts[i+1]
		}
		out = append(out, watched{parts[0], parts[1], dims})
	}
	return out
}

// The dashboard shows requests, latency, errors, builds, queue depth and
// the DLQ, each from a metric that is emitted for a resource of this stack.
func TestDashboardShowsRequestsLatencyErrorsBuildsAndQueues(t *testing.T) {
	emitted := emittedByCode(t)
	s := load(t, defaults)
	shown := map[string]bool{}
	var logQueries []string
	for _, w := range dashboard(t, s) {
		switch w.Type {
		case "metric":
			for _, m := range widgetMetrics(t, w) {
				checkEmitted(t, s, "widget "+w.Properties.Title, m, emitted)
				shown[m.key()] = true
			}
		case "log":
			logQueries = append(logQueries, w.Properties.Query)
		default:
			t.Errorf("widget type %q", w.Type)
		}
	}
	api := map[string]string{"ApiId": "Ref:HttpApi"}
	want := map[string]string{
		"requests":          metricKey("AWS/ApiGateway", "Count", api),
		"latency":           metricKey("AWS/ApiGateway", "Latency", api),
		"5xx answers":       metricKey("AWS/ApiGateway", "5xx", api),
		"failed builds":     metricKey(memory.MetricNamespace, memory.MetricFailedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}),
		"denied builds":     metricKey(memory.MetricNamespace, memory.MetricDeniedBuilds, map[string]string{memory.MetricDimension: "Ref:CompactFunction"}),
		"queue depth":       metricKey("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": "GetAtt:BuildQueue.QueueName"}),
		"queue age":         metricKey("AWS/SQS", "ApproximateAgeOfOldestMessage", map[string]string{"QueueName": "GetAtt:BuildQueue.QueueName"}),
		"dead-letter queue": metricKey("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": "GetAtt:BuildDeadLetterQueue.QueueName"}),
	}
	for fn := range functions {
		for _, m := range []string{"Errors", "Throttles", "Duration"} {
			want[fn+" "+m] = metricKey("AWS/Lambda", m, map[string]string{"FunctionName": "Ref:" + fn})
		}
	}
	for what, key := range want {
		if !shown[key] {
			t.Errorf("the dashboard does not show %s (%s)", what, key)
		}
	}
	// The builds that succeed write no metric (a healthy stack pays for
	// none); their records, one per build with its outcome, are counted
	// from the compact function's log group.
	var counted bool
	for _, q := range logQueries {
		counted = counted || (strings.Contains(q, "SOURCE 'Ref:CompactLogGroup'") &&
			strings.Contains(q, "msg = 'memory build'") && strings.Contains(q, "by outcome"))
	}
	if !counted {
		t.Errorf("no log widget counts the compact function's build records by outcome: %q", logQueries)
	}
}
