package infra

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestEveryFunctionLogsToItsOwnGroupThroughLoggingConfig(t *testing.T) {
	s := load(t, defaults)
	groups := s.GetAllLogsLogGroupResources()
	used := map[string]string{}
	for name := range functions {
		lc := s.logging[name]
		if lc == nil {
			t.Errorf("%s has no LoggingConfig", name)
			continue
		}
		ref, _ := lc["LogGroup"].(string)
		group, ok := strings.CutPrefix(ref, "Ref:")
		if _, exists := groups[group]; !ok || !exists {
			t.Errorf("%s logs to %q, not a log group of the stack", name, ref)
			continue
		}
		if other, ok := used[group]; ok {
			t.Errorf("%s and %s share the log group %s", name, other, group)
		}
		used[group] = name
		if lc["LogFormat"] != "Text" {
			t.Errorf("%s: log format %v, want Text (the code writes its own JSON and EMF lines)", name, lc["LogFormat"])
		}
	}
	for name, g := range groups {
		if g.LogGroupName != nil {
			t.Errorf("%s is declared by name %q: it races with Lambda creating it", name, *g.LogGroupName)
		}
		if g.RetentionInDays == nil || *g.RetentionInDays != 30 {
			t.Errorf("%s keeps logs %v days, want 30", name, g.RetentionInDays)
		}
	}
}

func TestAPIStageWritesAccessLogsAndThrottlesThePublicRoutes(t *testing.T) {
	s := load(t, defaults)
	st, err := s.GetApiGatewayV2StageWithName("HttpApiStage")
	if err != nil {
		t.Fatal(err)
	}
	al := st.AccessLogSettings
	if al == nil || deref(al.DestinationArn) != "GetAtt:ApiAccessLogGroup.Arn" {
		t.Fatalf("access logs %+v, want them in ApiAccessLogGroup", al)
	}
	var line map[string]string
	if err := json.Unmarshal([]byte(deref(al.Format)), &line); err != nil {
		t.Fatalf("access log format is not one JSON object: %v", err)
	}
	for _, field := range []string{"requestId", "routeKey", "status", "integrationError"} {
		if !strings.HasPrefix(line[field], "$context.") {
			t.Errorf("access log has no %s", field)
		}
	}

	// Every route without the authorizer gets a small share of its own.
	settings, _ := st.RouteSettings.(map[string]any)
	def := st.DefaultRouteSettings
	for _, name := range []string{"HealthRoute", "UIRoute", "UIFilesRoute"} {
		route, err := s.GetApiGatewayV2RouteWithName(name)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := settings[route.RouteKey].(map[string]any)
		rate, _ := h["ThrottlingRateLimit"].(float64)
		burst, _ := h["ThrottlingBurstLimit"].(float64)
		if rate <= 0 || burst <= 0 || def == nil || rate >= *def.ThrottlingRateLimit || burst >= float64(*def.ThrottlingBurstLimit) {
			t.Errorf("%s throttled at %v/s, burst %v; want its own limits under the default's", route.RouteKey, rate, burst)
		}
		if !slices.Contains(st.AWSCloudFormationDependsOn, name) {
			t.Errorf("the stage's route settings name %s, but the stage may be created before it", name)
		}
	}
}

// TestMemorySizesFitTheMeasuredPeaks: the API functions hold one request
// of at most 6 MB (Lambda's limit) at a measured peak under 3x its size
// (docs/perf-hooks.md) and images of at most 2048 px: 512 MB. The compact
// function decodes and downscales up to 20 images a build, for the builds
// of a batch running at once: it keeps 1024 MB.
func TestMemorySizesFitTheMeasuredPeaks(t *testing.T) {
	want := map[string]int{"RestoreFunction": 512, "OffloadFunction": 512, "MemoryFunction": 512, "ViewFunction": 512, "CompactFunction": 1024}
	s := load(t, defaults)
	for name, mb := range want {
		if f := s.function(t, name); f.MemorySize == nil || *f.MemorySize != mb {
			t.Errorf("%s has %v MB, want %d", name, f.MemorySize, mb)
		}
	}
}
