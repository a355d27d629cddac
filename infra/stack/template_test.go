package stack

import (
	"slices"
	"strings"
	"testing"
)

func TestTheTemplateIsReadWithTheDeploymentsNamesAndParameters(t *testing.T) {
	phys := Physical{Refs: map[string]string{"Bucket": "b", "Table": "t", "BuildQueue": "http://q/BuildQueue"}}
	tpl, err := ReadTemplate("../../template.yaml", map[string]string{"JwtIssuer": "http://127.0.0.1:1/", "JwtAudience": "a,b"}, phys)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.Functions) != 5 || tpl.Functions["CompactFunction"].Timeout != 120 {
		t.Fatalf("functions %+v", tpl.Functions)
	}
	if env := tpl.Functions["MemoryFunction"].Env; env["DURACHAT_BUCKET"] != "b" || env["DURACHAT_TABLE"] != "t" || env["DURACHAT_QUEUE_URL"] != "http://q/BuildQueue" ||
		env["DURACHAT_JWT_ISSUER"] != "http://127.0.0.1:1/" {
		t.Errorf("memory env %v", env)
	}
	a, ok := tpl.Authorizers["JwtAuthorizer"]
	if !ok || a.Issuer != "http://127.0.0.1:1/" || !slices.Equal(a.Audience, []string{"a", "b"}) {
		t.Errorf("authorizers %+v", tpl.Authorizers)
	}
	for _, r := range tpl.Routes {
		if in := tpl.Integrations[r.Integration]; in.Function == "" || in.TimeoutMillis != 30000 {
			t.Errorf("route %+v integration %+v", r, in)
		}
		public := r.Key == "GET /healthz" || r.Key == "GET /v1/openapi.json" || r.Key == "GET /ui" || r.Key == "GET /ui/{proxy+}" ||
			strings.HasPrefix(r.Key, "GET /.well-known/oauth-protected-resource")
		if (r.AuthType == "JWT") == public {
			t.Errorf("route %+v", r)
		}
	}
	if len(tpl.Sources) != 1 || tpl.Sources[0] != (EventSource{Function: "CompactFunction", Queue: "BuildQueue", QueueARN: "GetAtt:BuildQueue.Arn", BatchSize: 10, ReportFailures: true, MaxConcurrency: 200, BatchWindow: 0}) {
		t.Errorf("sources %+v", tpl.Sources)
	}
	if q := tpl.Queues["BuildQueue"]; q.VisibilityTimeout != 720 || q.DeadLetterQueue != "BuildDeadLetterQueue" || q.MaxReceiveCount != 1000 {
		t.Errorf("queue %+v", q)
	}
	if a := tpl.Alarms["DeadLetterAlarm"]; a.Namespace != "AWS/SQS" || a.MetricName != "ApproximateNumberOfMessagesVisible" ||
		a.Dimensions["QueueName"] != "GetAtt:BuildDeadLetterQueue.QueueName" || a.Threshold != 0 || a.ComparisonOperator != "GreaterThanThreshold" {
		t.Errorf("the DLQ's alarm %+v", a)
	}

	const secret = "arn:aws:secretsmanager:us-east-1:000000000000:secret:t-AbCdEf"
	tpl, err = ReadTemplate("../../template.yaml", map[string]string{"ApiTokensSecret": secret}, phys)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.Authorizers) != 0 || tpl.Functions["RestoreFunction"].Env["DURACHAT_TOKENS_SECRET"] != secret {
		t.Errorf("without JWT: %+v %v", tpl.Authorizers, tpl.Functions["RestoreFunction"].Env)
	}
	for _, r := range tpl.Routes {
		if r.AuthType != "NONE" {
			t.Errorf("route %+v", r)
		}
	}
	// The build throughput parameters reach the event source and the
	// compact function, as CloudFormation passes a Number parameter: a string.
	tpl, err = ReadTemplate("../../template.yaml", map[string]string{"BuildConcurrency": "7", "BuildBatchSize": "30", "BuildBatchWindow": "2"}, phys)
	if err != nil {
		t.Fatal(err)
	}
	if src := tpl.Sources[0]; src.MaxConcurrency != 7 || src.BatchSize != 30 || src.BatchWindow != 2 ||
		tpl.Functions["CompactFunction"].Env["DURACHAT_BATCH_BUILDS"] != "30" {
		t.Errorf("with build parameters: source %+v, compact env %v", src, tpl.Functions["CompactFunction"].Env)
	}
	targets, err := BuildTargets("../../Makefile")
	if err != nil || targets["CompactFunction"] != "./functions/compact" || targets["ViewFunction"] != "./functions/memory" || len(targets) != 5 {
		t.Errorf("targets %v %v", targets, err)
	}
}

func TestAnAlarmBreachesOnItsComparisonWithItsThreshold(t *testing.T) {
	for _, c := range []struct {
		op     string
		value  float64
		breach bool
	}{
		{"GreaterThanThreshold", 0, false},
		{"GreaterThanThreshold", 1, true},
		{"GreaterThanOrEqualToThreshold", 0, true},
		{"GreaterThanOrEqualToThreshold", -1, false},
		{"LessThanThreshold", -1, true},
		{"LessThanThreshold", 0, false},
		{"LessThanOrEqualToThreshold", 0, true},
		{"LessThanOrEqualToThreshold", 1, false},
	} {
		got, err := AlarmDef{Threshold: 0, ComparisonOperator: c.op}.Breaches(c.value)
		if err != nil || got != c.breach {
			t.Errorf("%s 0 with %v: %v %v, want %v", c.op, c.value, got, err, c.breach)
		}
	}
	if _, err := (AlarmDef{ComparisonOperator: "LessThanLowerThreshold"}).Breaches(0); err == nil {
		t.Error("an anomaly band comparison is not emulated, and must say so")
	}
}

// TestEachFunctionGetsTheConcurrencyLambdaWouldGiveIt: the stack's
// execution environments follow the template as Lambda's concurrency
// does: a reservation is a function's own bound; the functions without
// one share one pool, what the reservations leave of the account's quota;
// an event source's function runs at most its MaximumConcurrency.
func TestEachFunctionGetsTheConcurrencyLambdaWouldGiveIt(t *testing.T) {
	phys := Physical{Refs: map[string]string{}}
	for _, tc := range []struct {
		name    string
		params  map[string]string
		account int
		max     map[string]int
		pooled  []string
		pool    int
		refused bool
	}{
		{
			name: "nothing reserved", account: 0,
			max:    map[string]int{"RestoreFunction": 1000, "OffloadFunction": 1000, "MemoryFunction": 1000, "ViewFunction": 1000, "CompactFunction": 200},
			pooled: []string{"CompactFunction", "MemoryFunction", "OffloadFunction", "RestoreFunction", "ViewFunction"}, pool: 1000,
		},
		{
			name: "the view and memory reserved", params: map[string]string{"ViewConcurrency": "100", "MemoryConcurrency": "20"}, account: 1000,
			max:    map[string]int{"RestoreFunction": 880, "OffloadFunction": 880, "MemoryFunction": 20, "ViewFunction": 100, "CompactFunction": 200},
			pooled: []string{"CompactFunction", "OffloadFunction", "RestoreFunction"}, pool: 880,
		},
		{
			name: "compact reserved under its mapping's bound", params: map[string]string{"CompactConcurrency": "30", "BuildConcurrency": "50"}, account: 200,
			max:    map[string]int{"RestoreFunction": 170, "OffloadFunction": 170, "MemoryFunction": 170, "ViewFunction": 170, "CompactFunction": 30},
			pooled: []string{"MemoryFunction", "OffloadFunction", "RestoreFunction", "ViewFunction"}, pool: 170,
		},
		{name: "reservations leaving under 100", params: map[string]string{"ViewConcurrency": "50"}, account: 149, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := ReadTemplate("../../template.yaml", tc.params, phys)
			if err != nil {
				t.Fatal(err)
			}
			limits, err := Concurrency(tpl, tc.account)
			if tc.refused {
				if err == nil {
					t.Fatalf("limits %v: want the reservations refused", limits)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pools []*Pool
			var pooled []string
			for name, l := range limits {
				if l.Max != tc.max[name] {
					t.Errorf("%s: at most %d, want %d", name, l.Max, tc.max[name])
				}
				if l.Pool != nil {
					pooled = append(pooled, name)
					if !slices.Contains(pools, l.Pool) {
						pools = append(pools, l.Pool)
					}
				}
			}
			slices.Sort(pooled)
			if !slices.Equal(pooled, tc.pooled) || len(pools) != 1 || pools[0].Size() != tc.pool {
				t.Errorf("%v share %d pools (%v), want %v sharing one of %d", pooled, len(pools), pools, tc.pooled, tc.pool)
			}
		})
	}
}
