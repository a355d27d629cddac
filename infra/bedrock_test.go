package infra

import (
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/config"
)

// commercialRegions are the commercial AWS Regions a stack may be
// deployed in (those where Lambda, DynamoDB, SQS and the HTTP API run).
var commercialRegions = []string{
	"us-east-1", "us-east-2", "us-west-1", "us-west-2",
	"ca-central-1", "ca-west-1", "mx-central-1", "sa-east-1",
	"eu-central-1", "eu-central-2", "eu-west-1", "eu-west-2", "eu-west-3",
	"eu-north-1", "eu-south-1", "eu-south-2",
	"ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
	"ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
	"ap-southeast-5", "ap-southeast-7", "ap-south-1", "ap-south-2",
	"ap-east-1", "ap-east-2", "me-central-1", "me-south-1", "il-central-1",
	"af-south-1",
}

func TestEveryRegionDerivesAnInferenceProfileOfItsGeography(t *testing.T) {
	s := load(t, defaults)
	profiles, _ := s.raw["Mappings"].(map[string]any)["BedrockProfiles"].(map[string]any)
	// A geography's own profile where Claude Haiku 4.5 has one.
	geo := map[string]string{"us-": "us", "eu-": "eu", "ap-northeast-1": "jp", "ap-northeast-3": "jp", "ap-southeast-2": "au", "ap-southeast-4": "au"}
	for _, region := range commercialRegions {
		entry, _ := profiles[region].(map[string]any)
		got, _ := entry["Prefix"].(string)
		want := "global"
		for prefix, p := range geo {
			if strings.HasPrefix(region, prefix) {
				want = p
			}
		}
		if got != want {
			t.Errorf("%s: profile %q, want %q", region, got, want)
		}
	}
	if len(profiles) != len(commercialRegions) {
		t.Errorf("the map has %d Regions, the test knows %d", len(profiles), len(commercialRegions))
	}
}

func TestInferenceProfileIsNeverEmpty(t *testing.T) {
	s := load(t, defaults)
	p := s.Parameters["BedrockInferenceProfile"]
	for _, v := range []string{"auto", "global", "us", "eu", "apac", "jp", "au"} {
		if !slices.Contains(p.AllowedValues, any(v)) {
			t.Errorf("profile %q not allowed (%v)", v, p.AllowedValues)
		}
	}
	if slices.Contains(p.AllowedValues, any("")) {
		t.Error("an empty profile is allowed: Claude Haiku 4.5 has no in-Region throughput, every build would fail")
	}
	tests := []struct {
		params map[string]any
		model  string
	}{
		{defaults, "bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0"},
		{allOptions, "bedrock:global.anthropic.claude-haiku-4-5-20251001-v1:0"},
	}
	for _, tt := range tests {
		f := load(t, tt.params).function(t, "CompactFunction")
		if got := f.Environment.Variables[config.EnvModel]; got != tt.model {
			t.Errorf("%s = %q, want %q", config.EnvModel, got, tt.model)
		}
	}
}
