package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// evalRule evaluates a Rules expression (Fn::Equals, Fn::Not, Fn::And,
// Fn::Or over Refs of parameters and literals) with the parameter values.
func evalRule(t *testing.T, expr any, params map[string]string) any {
	t.Helper()
	m, ok := expr.(map[string]any)
	if !ok {
		return expr
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Ref":
			return params[arg.(string)]
		case "Fn::Equals":
			return fmt.Sprint(evalRule(t, args[0], params)) == fmt.Sprint(evalRule(t, args[1], params))
		case "Fn::Not":
			return !evalRule(t, args[0], params).(bool)
		case "Fn::And", "Fn::Or":
			all, any := true, false
			for _, a := range args {
				v := evalRule(t, a, params).(bool)
				all, any = all && v, any || v
			}
			if fn == "Fn::And" {
				return all
			}
			return any
		}
		t.Fatalf("rule function %s: the test cannot evaluate it", fn)
	}
	return nil
}

// ruleFailures is the rules a deployment with params would fail on.
func ruleFailures(t *testing.T, rules map[string]any, params map[string]string) []string {
	t.Helper()
	var failed []string
	for name, r := range rules {
		rule := r.(map[string]any)
		if c, ok := rule["RuleCondition"]; ok && !evalRule(t, c, params).(bool) {
			continue
		}
		for _, a := range rule["Assertions"].([]any) {
			if !evalRule(t, a.(map[string]any)["Assert"], params).(bool) {
				failed = append(failed, name)
			}
		}
	}
	slices.Sort(failed)
	return failed
}

func TestParametersThatWorkOnlyTogetherCannotBeHalfSet(t *testing.T) {
	written := writtenTemplate(t)
	rules, _ := written["Rules"].(map[string]any)
	tests := []struct {
		name   string
		params map[string]string
		ok     bool
	}{
		{"neither JWT parameter", nil, true},
		{"both JWT parameters", map[string]string{"JwtIssuer": "https://issuer.example.com/", "JwtAudience": "a,b"}, true},
		{"issuer without audience", map[string]string{"JwtIssuer": "https://issuer.example.com/"}, false},
		{"audience without issuer", map[string]string{"JwtAudience": "a"}, false},
		{"compactor URL", map[string]string{"CompactorUrl": "https://c.example.com/"}, true},
		{"compactor function", map[string]string{"CompactorFunction": "my-compactor"}, true},
		{"compactor URL and function", map[string]string{"CompactorUrl": "https://c.example.com/", "CompactorFunction": "my-compactor"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]string{"JwtIssuer": "", "JwtAudience": "", "CompactorUrl": "", "CompactorFunction": ""}
			for k, v := range tt.params {
				params[k] = v
			}
			failed := ruleFailures(t, rules, params)
			if (len(failed) == 0) != tt.ok {
				t.Errorf("rules failed: %v; want deployable %v", failed, tt.ok)
			}
		})
	}
}

func TestParameterPatternsRefuseWhatCannotWork(t *testing.T) {
	params, _ := writtenTemplate(t)["Parameters"].(map[string]any)
	tests := []struct {
		param, value string
		ok           bool
	}{
		{"JwtIssuer", "", true},
		{"JwtIssuer", "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_abc", true},
		{"JwtIssuer", "http://issuer.example.com/", false},
		{"JwtIssuer", "issuer.example.com", false},
		{"JwtAudience", "client-a,client-b", true},
		{"JwtAudience", "client-a, client-b", false},
		{"CompactorUrl", "https://c.example.com/compact", true},
		{"CompactorUrl", "http://c.example.com/compact", false},
		{"CompactorFunction", "my-compactor", true},
		{"CompactorFunction", "my-compactor:live", true},
		{"CompactorFunction", compactorARN, true},
		{"CompactorFunction", compactorARN + ":live", true},
		{"CompactorFunction", "https://c.example.com/", false},
		{"CompactorFunction", "arn:aws:s3:::bucket", false},
	}
	for _, tt := range tests {
		t.Run(tt.param+" "+tt.value, func(t *testing.T) {
			p, _ := params[tt.param].(map[string]any)
			pattern, _ := p["AllowedPattern"].(string)
			if pattern == "" {
				t.Fatalf("%s has no AllowedPattern", tt.param)
			}
			if got := regexp.MustCompile(pattern).MatchString(tt.value); got != tt.ok {
				t.Errorf("%q matches %s: %v, want %v", tt.value, pattern, got, tt.ok)
			}
		})
	}
}

func TestCompactorFunctionByNameOrARNIsTheGrantedResource(t *testing.T) {
	tests := []struct {
		function string
		want     []string
	}{
		{"my-compactor", []string{
			"arn:{AWS::Partition}:lambda:{AWS::Region}:{AWS::AccountId}:function:my-compactor",
			"arn:{AWS::Partition}:lambda:{AWS::Region}:{AWS::AccountId}:function:my-compactor:*",
		}},
		{compactorARN, []string{compactorARN, compactorARN + ":*"}},
	}
	for _, tt := range tests {
		s := load(t, map[string]any{"CompactorFunction": tt.function})
		var got []string
		for _, g := range grants(t, s.function(t, "CompactFunction")) {
			if slices.Contains(g.actions, "lambda:InvokeFunction") {
				got = append(got, g.resources...)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: may invoke %v, want %v", tt.function, got, tt.want)
		}
	}
}

// writtenTemplate is the template as written, short forms (!Equals) in
// their long form (Fn::Equals), nothing resolved.
func writtenTemplate(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	written, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(written, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}
