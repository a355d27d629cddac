package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"

	localstack "github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/store"
)

// functions maps each Lambda function of the template to the program its
// code is (functions/<program>) and whose variables config declares.
var functions = map[string]config.Program{
	"RestoreFunction": config.Restore,
	"OffloadFunction": config.Offload,
	"MemoryFunction":  config.Memory,
	"ViewFunction":    config.Memory, // the view route's own function
	"CompactFunction": config.Compact,
}

const templatePath = "../template.yaml"

// The two parameter sets the tests read the template with: the defaults
// (no JWT authorizer, model through an inference profile) and a stack
// with every option on.
var (
	defaults   = map[string]any{}
	allOptions = map[string]any{
		"JwtIssuer":               "https://issuer.example.com/",
		"JwtAudience":             "client-a,client-b",
		"BedrockInferenceProfile": "global",
		"CompactorFunction":       "my-compactor",
		"AlarmTopicArn":           "arn:aws:sns:us-east-1:123456789012:alerts",
		"TableDeletionProtection": "false",
		"ApiTokensSecret":         tokensSecretARN,
		"BackupRetentionDays":     "35",
		"EmbedModel":              "amazon.titan-embed-text-v2:0",
		// Reserved concurrency (none by default).
		"RestoreConcurrency": "20",
		"OffloadConcurrency": "20",
		"MemoryConcurrency":  "40",
		"ViewConcurrency":    "40",
		"CompactConcurrency": "5",
	}
	// compactorByARN names the custom compactor by ARN, in another Region.
	compactorByARN = map[string]any{"CompactorFunction": compactorARN}
	// alarmEmail subscribes an address to the stack's own alarm topic
	// (which allOptions replaces with an existing one).
	alarmEmail = map[string]any{"AlarmEmail": "ops@example.com"}
	// tokensInSSM keeps the bearer tokens in an SSM SecureString.
	tokensInSSM = map[string]any{"ApiTokensSecret": tokensParameterARN}
)

// Where allOptions and tokensInSSM keep the bearer tokens.
const (
	tokensSecretARN    = "arn:aws:secretsmanager:us-east-1:123456789012:secret:durachat/tokens-AbC123"
	tokensParameterARN = "arn:aws:ssm:us-east-1:123456789012:parameter/durachat/tokens"
)

const compactorARN = "arn:aws:lambda:eu-west-1:210987654321:function:their-compactor"

// Intrinsics resolve to readable placeholders so tests can see what a
// value refers to: "Ref:Bucket", "GetAtt:Table.Arn"; parameters to their
// values; pseudo parameters to "{AWS::Region}".
var placeholderHandlers = map[string]intrinsics.IntrinsicHandler{
	"Ref":           refPlaceholder,
	"Fn::GetAtt":    getAttPlaceholder,
	"Fn::Sub":       subPlaceholder,
	"Fn::If":        ifCondition,
	"Fn::FindInMap": findInMap,
	"Fn::Split":     split,
}

// split resolves Fn::Split to a list Fn::Select can index (goformation's
// own returns a []string, which its Fn::Select does not take).
func split(_ string, input any, _ any) any {
	args, ok := input.([]any)
	if !ok || len(args) != 2 {
		return nil
	}
	delim, _ := args[0].(string)
	src, _ := args[1].(string)
	var out []any
	for _, p := range strings.Split(src, delim) {
		out = append(out, p)
	}
	return out
}

// mapRegion is the Region a map keyed by "{AWS::Region}" is read at.
const mapRegion = "us-east-1"

// findInMap resolves Fn::FindInMap, reading a map keyed by the Region at
// mapRegion.
func findInMap(name string, input any, template any) any {
	if args, ok := input.([]any); ok && len(args) == 3 && args[1] == "{AWS::Region}" {
		input = []any{args[0], mapRegion, args[2]}
	}
	return intrinsics.FnFindInMap(name, input, template)
}

// ifCondition resolves Fn::If by evaluating the named condition with the
// parameter values. (goformation's own EvaluateConditions also replaces a
// resource that has a Condition attribute with the condition's value.)
func ifCondition(_ string, input any, template any) any {
	args, _ := input.([]any)
	if len(args) != 3 {
		return nil
	}
	name, _ := args[0].(string)
	tpl, _ := template.(map[string]any)
	conds, _ := tpl["Conditions"].(map[string]any)
	expr, ok := conds[name]
	if !ok {
		panic(fmt.Sprintf("Fn::If names an unknown condition %q", name))
	}
	doc, err := json.Marshal(map[string]any{"Parameters": tpl["Parameters"], "Value": expr})
	if err != nil {
		panic(err)
	}
	out, err := intrinsics.ProcessJSON(doc, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{"Fn::Split": split},
	})
	if err != nil {
		panic(err)
	}
	var v struct{ Value any }
	if err := json.Unmarshal(out, &v); err != nil {
		panic(err)
	}
	b, ok := v.Value.(bool)
	if !ok {
		panic(fmt.Sprintf("condition %q does not evaluate to a boolean: %v", name, v.Value))
	}
	if b {
		return args[1]
	}
	return args[2]
}

func paramValue(name string, template any) (any, bool) {
	tpl, _ := template.(map[string]any)
	params, _ := tpl["Parameters"].(map[string]any)
	p, ok := params[name].(map[string]any)
	if !ok {
		return nil, false
	}
	return p["Default"], true
}

func refPlaceholder(_ string, input any, template any) any {
	name, _ := input.(string)
	switch {
	case name == "AWS::NoValue":
		return localstack.NoValue
	case strings.HasPrefix(name, "AWS::"):
		return "{" + name + "}"
	}
	if v, ok := paramValue(name, template); ok {
		return v
	}
	return "Ref:" + name
}

func getAttPlaceholder(_ string, input any, _ any) any {
	switch v := input.(type) {
	case string:
		return "GetAtt:" + v
	case []any:
		parts := make([]string, len(v))
		for i, p := range v {
			parts[i] = fmt.Sprint(p)
		}
		return "GetAtt:" + strings.Join(parts, ".")
	}
	return nil
}

func subPlaceholder(_ string, input any, template any) any {
	return localstack.Sub(input, func(name string) string {
		if strings.Contains(name, ".") {
			return getAttPlaceholder("", name, template).(string)
		}
		return fmt.Sprint(refPlaceholder("", name, template))
	})
}

// stack is the template as deployed with one parameter set.
type stack struct {
	*cloudformation.Template
	raw        map[string]any // the resolved JSON
	conditions any            // the Conditions section before resolution
	// logging is each serverless function's LoggingConfig, which
	// goformation's types and SAM schema predate: load takes it out of the
	// functions before they are parsed and checked.
	logging map[string]map[string]any
	// recoveryDays is the table's PointInTimeRecoverySpecification
	// RecoveryPeriodInDays, which goformation's types also predate.
	recoveryDays map[string]any
}

// schemaDoc is the template for the schema check: resolved, but with the
// condition expressions as written (resolution turns them into booleans,
// which the schema rightly refuses).
func (s stack) schemaDoc() map[string]any {
	doc := maps.Clone(s.raw)
	if s.conditions != nil {
		doc["Conditions"] = s.conditions
	}
	// goformation's SAM schema predates the Rules section; cfn-lint checks
	// it, and params_test.go what it refuses.
	delete(doc, "Rules")
	// Its schema also types a parameter's MinValue and MaxValue as strings;
	// CloudFormation documents them as numbers (and goformation's own
	// types parse them so).
	params, _ := doc["Parameters"].(map[string]any)
	doc["Parameters"] = maps.Clone(params)
	for name, p := range params {
		pm, _ := p.(map[string]any)
		pm = maps.Clone(pm)
		for _, k := range []string{"MinValue", "MaxValue"} {
			if v, ok := pm[k].(float64); ok {
				pm[k] = strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		doc["Parameters"].(map[string]any)[name] = pm
	}
	return doc
}

func load(t *testing.T, params map[string]any) stack {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: placeholderHandlers,
		ParameterOverrides:        params,
	})
	if err != nil {
		t.Fatalf("resolving the template: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(resolved, &raw); err != nil {
		t.Fatal(err)
	}
	localstack.DropNoValue(raw)
	logging := map[string]map[string]any{}
	recoveryDays := map[string]any{}
	resources, _ := raw["Resources"].(map[string]any)
	for name, r := range resources {
		res, _ := r.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		if err := convertParameterValues(props); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pitr, ok := props["PointInTimeRecoverySpecification"].(map[string]any); ok && res["Type"] == "AWS::DynamoDB::Table" {
			if d, ok := pitr["RecoveryPeriodInDays"]; ok {
				recoveryDays[name] = d
				delete(pitr, "RecoveryPeriodInDays")
			}
		}
		if lc, ok := props["LoggingConfig"].(map[string]any); ok && res["Type"] == "AWS::Serverless::Function" {
			logging[name] = lc
			delete(props, "LoggingConfig")
		}
	}
	if resolved, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	// The typed parse fails on unknown properties and wrong types.
	tpl, err := goformation.ParseJSONWithOptions(resolved, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatalf("parsing the template: %v", err)
	}
	// Short forms (!Equals) in their long form (Fn::Equals), unresolved.
	written, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatalf("reading the template: %v", err)
	}
	var unresolved struct{ Conditions any }
	if err := json.Unmarshal(written, &unresolved); err != nil {
		t.Fatal(err)
	}
	return stack{Template: tpl, raw: raw, conditions: unresolved.Conditions, logging: logging, recoveryDays: recoveryDays}
}

// parameterTyped names the properties a parameter sets whose type is not
// a string: a parameter's value reaches them as a string, which
// CloudFormation converts; the typed parse wants the number or boolean.
var parameterTyped = map[string]string{
	"ReservedConcurrentExecutions":   "int",
	"BatchSize":                      "int",
	"MaximumBatchingWindowInSeconds": "int",
	"MaximumConcurrency":             "int",
	"NoncurrentDays":                 "int",
	"RecoveryPeriodInDays":           "int",
	"DeletionProtectionEnabled":      "bool",
}

// convertParameterValues converts, anywhere under v, the string values of
// the properties parameterTyped names.
func convertParameterValues(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && parameterTyped[k] != "" {
				var err error
				switch parameterTyped[k] {
				case "int":
					x[k], err = strconv.Atoi(s)
				case "bool":
					x[k], err = strconv.ParseBool(s)
				}
				if err != nil {
					return fmt.Errorf("%s %q is not a%s", k, s, map[string]string{"int": " number", "bool": " boolean"}[parameterTyped[k]])
				}
				continue
			}
			if err := convertParameterValues(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := convertParameterValues(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s stack) function(t *testing.T, name string) *serverless.Function {
	t.Helper()
	f, err := s.GetServerlessFunctionWithName(name)
	if err != nil {
		t.Fatalf("function %s: %v", name, err)
	}
	return f
}

func TestEveryFunctionIsAnArm64BootstrapBuiltByMake(t *testing.T) {
	s := load(t, defaults)
	all := s.GetAllServerlessFunctionResources()
	if len(all) != len(functions) {
		t.Errorf("template has %d functions, want %d", len(all), len(functions))
	}
	for name := range all {
		if _, ok := functions[name]; !ok {
			t.Errorf("function %s is not known to this test (and config)", name)
		}
	}
	for name := range functions {
		f := s.function(t, name)
		if got := deref(f.Runtime); got != "provided.al2023" {
			t.Errorf("%s: runtime %q", name, got)
		}
		if !slices.Equal(f.Architectures, []string{"arm64"}) {
			t.Errorf("%s: architectures %v", name, f.Architectures)
		}
		if got := deref(f.Handler); got != "bootstrap" {
			t.Errorf("%s: handler %q", name, got)
		}
		if got := f.AWSCloudFormationMetadata["BuildMethod"]; got != "makefile" {
			t.Errorf("%s: BuildMethod %v", name, got)
		}
		if f.CodeUri == nil || f.CodeUri.String == nil || *f.CodeUri.String != "." {
			t.Errorf("%s: CodeUri must be the module root", name)
		}
		if f.Timeout == nil || *f.Timeout <= 0 {
			t.Errorf("%s: no timeout", name)
		}
	}
}

// A call that found a chat live may write into it until its function's
// timeout ends it: the last sweep after the chat's deletion comes well
// after the longest.
func TestEveryFunctionsTimeoutEndsWellBeforeTheSweepAfterADeletion(t *testing.T) {
	s := load(t, defaults)
	for name := range functions {
		f := s.function(t, name)
		if f.Timeout == nil {
			t.Fatalf("%s: no timeout", name)
		}
		if timeout := time.Duration(*f.Timeout) * time.Second; 2*timeout > lifecycle.SettleAfter {
			t.Errorf("%s: timeout %s is over half the delay of the sweep after a deletion (%s)", name, timeout, lifecycle.SettleAfter)
		}
	}
}

// makeTargets are the Makefile's target names.
func makeTargets(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+):`).FindAllStringSubmatch(string(data), -1) {
		targets = append(targets, m[1])
	}
	return targets
}

func TestMakefileHasABuildTargetPerFunction(t *testing.T) {
	targets := makeTargets(t)
	s := load(t, defaults)
	for name := range s.GetAllServerlessFunctionResources() {
		if !slices.Contains(targets, "build-"+name) {
			t.Errorf("Makefile has no build-%s target for sam build", name)
		}
	}
}

func TestBuildTargetsMakeAnArm64BootstrapOfTheirFunction(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	artifacts := t.TempDir()
	for name, program := range functions {
		out, err := exec.Command("make", "-s", "-n", "-C", "..", "build-"+name, "ARTIFACTS_DIR="+artifacts).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n build-%s: %v\n%s", name, err, out)
		}
		cmd := string(out)
		for _, want := range []string{
			"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "-tags lambda.norpc", "-trimpath", `-ldflags "-s -w"`,
			"-o " + filepath.Join(artifacts, "bootstrap") + " ./functions/" + string(program),
		} {
			if !strings.Contains(cmd, want) {
				t.Errorf("build-%s does not run %q:\n%s", name, want, cmd)
			}
		}
		if _, err := os.Stat(filepath.Join("..", "functions", string(program), "main.go")); err != nil {
			t.Errorf("build-%s builds a missing program: %v", name, err)
		}
	}
}

func TestEveryVariableAFunctionReadsIsSet(t *testing.T) {
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		for name, program := range functions {
			f := s.function(t, name)
			var set []string
			if f.Environment != nil {
				for k := range f.Environment.Variables {
					set = append(set, k)
				}
			}
			sort.Strings(set)
			reads := config.Vars(program)
			for _, v := range reads {
				if !slices.Contains(set, v) {
					t.Errorf("%s reads %s but the template does not set it", name, v)
				}
			}
			for _, v := range set {
				if !slices.Contains(reads, v) {
					t.Errorf("%s sets %s, which %s never reads", name, v, program)
				}
			}
			for _, v := range config.Required(program) {
				if f.Environment == nil || f.Environment.Variables[v] == "" {
					t.Errorf("%s: required %s is empty", name, v)
				}
			}
		}
	}
}

func TestFunctionsPointAtTheStackResources(t *testing.T) {
	s := load(t, defaults)
	want := map[string]string{
		config.EnvTable:    "Ref:Table",
		config.EnvBucket:   "Ref:Bucket",
		config.EnvQueueURL: "Ref:BuildQueue",
	}
	for name := range functions {
		env := s.function(t, name).Environment.Variables
		for k, v := range want {
			if got, ok := env[k]; ok && got != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got, v)
			}
		}
	}
	compact := s.function(t, "CompactFunction").Environment.Variables
	if m := compact[config.EnvModel]; m != "bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0" {
		t.Errorf("compact model %q", m)
	}
}

// grant is one Allow statement of a function's policy.
type grant struct {
	actions   []string
	resources []string
	condition map[string]any
}

func grants(t *testing.T, f *serverless.Function) []grant {
	t.Helper()
	if f.Policies == nil || f.Policies.IAMPolicyDocument == nil {
		t.Fatal("policies must be one inline policy document")
	}
	var out []grant
	for _, st := range f.Policies.IAMPolicyDocument.Statement {
		if st == nil {
			t.Error("a policy statement is null")
			continue
		}
		m, _ := st.(map[string]any)
		if m["Effect"] != "Allow" {
			t.Errorf("statement %v is not an Allow", m)
		}
		cond, _ := m["Condition"].(map[string]any)
		out = append(out, grant{actions: strs(m["Action"]), resources: strs(m["Resource"]), condition: cond})
	}
	return out
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if e != nil {
				out = append(out, fmt.Sprint(e))
			}
		}
		return out
	}
	return nil
}

// titanARN is the embedding model of search by meaning, in the stack's
// Region.
const titanARN = "arn:{AWS::Partition}:bedrock:{AWS::Region}::foundation-model/amazon.titan-embed-text-v2:0"

// allowed lists, per function, every action it may have and the
// resources each may name.
var allowed = map[string]map[string][]string{
	"RestoreFunction": {
		"s3:ListBucket": {"arn:{AWS::Partition}:s3:::Ref:Bucket"},
		"s3:GetObject":  {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*"},
		// Which images the chat names (only in the chats' partitions: see
		// TestRestoreReadsOnlyChatPartitions).
		"dynamodb:GetItem": {"GetAtt:Table.Arn"}, "dynamodb:BatchGetItem": {"GetAtt:Table.Arn"},
		// The bearer tokens, when ApiTokensSecret names them.
		"secretsmanager:GetSecretValue": {tokensSecretARN},
		"ssm:GetParameter":              {tokensParameterARN},
	},
	"OffloadFunction": {
		"s3:ListBucket": {"arn:{AWS::Partition}:s3:::Ref:Bucket"},
		// Direct uploads: presigning PUTs of staged uploads, and claiming them.
		"s3:GetObject":    {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*"},
		"s3:PutObject":    {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*"},
		"s3:DeleteObject": {"arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*"},
		// Recording the images it stores for their chats (only in the
		// partitions of references, leases and the chat index: see
		// TestOffloadWritesOnlyReferencePartitions).
		"dynamodb:GetItem": {"GetAtt:Table.Arn"}, "dynamodb:PutItem": {"GetAtt:Table.Arn"},
		"dynamodb:BatchGetItem":         {"GetAtt:Table.Arn"},
		"secretsmanager:GetSecretValue": {tokensSecretARN},
		"ssm:GetParameter":              {tokensParameterARN},
	},
	"MemoryFunction": {
		"s3:ListBucket": {"arn:{AWS::Partition}:s3:::Ref:Bucket"},
		"s3:GetObject":  {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/text/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*"},
		"s3:PutObject":  {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/text/*"},
		// Claiming a staged upload; deleting a chat's images and texts.
		"s3:DeleteObject":  {"arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/text/*"},
		"dynamodb:GetItem": {"GetAtt:Table.Arn"}, "dynamodb:PutItem": {"GetAtt:Table.Arn"},
		"dynamodb:Query":        {"GetAtt:Table.Arn"},
		"dynamodb:BatchGetItem": {"GetAtt:Table.Arn"},
		"sqs:SendMessage":       {"GetAtt:BuildQueue.Arn"},
		// Deleting a chat: its rows, and the images only it named.
		"dynamodb:DeleteItem":           {"GetAtt:Table.Arn"},
		"secretsmanager:GetSecretValue": {tokensSecretARN},
		"ssm:GetParameter":              {tokensParameterARN},
		// Search by meaning embeds its queries, when EmbedModel is set.
		"bedrock:InvokeModel": {titanARN},
	},
	// The view: the chat's rows and state, and scheduling builds.
	"ViewFunction": {
		"dynamodb:GetItem": {"GetAtt:Table.Arn"}, "dynamodb:PutItem": {"GetAtt:Table.Arn"},
		"dynamodb:Query":                {"GetAtt:Table.Arn"},
		"dynamodb:BatchGetItem":         {"GetAtt:Table.Arn"},
		"sqs:SendMessage":               {"GetAtt:BuildQueue.Arn"},
		"secretsmanager:GetSecretValue": {tokensSecretARN},
		"ssm:GetParameter":              {tokensParameterARN},
	},
	"CompactFunction": {
		"s3:ListBucket":    {"arn:{AWS::Partition}:s3:::Ref:Bucket"},
		"s3:GetObject":     {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/text/*"},
		"s3:PutObject":     {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*.description"},
		"dynamodb:GetItem": {"GetAtt:Table.Arn"}, "dynamodb:PutItem": {"GetAtt:Table.Arn"},
		"dynamodb:Query":        {"GetAtt:Table.Arn"},
		"dynamodb:BatchGetItem": {"GetAtt:Table.Arn"},
		"sqs:ReceiveMessage":    {"GetAtt:BuildQueue.Arn"}, "sqs:DeleteMessage": {"GetAtt:BuildQueue.Arn"},
		"sqs:ChangeMessageVisibility": {"GetAtt:BuildQueue.Arn"}, "sqs:GetQueueAttributes": {"GetAtt:BuildQueue.Arn"},
		"sqs:SendMessage": {"GetAtt:BuildQueue.Arn"},
		// Continuing a large chat deletion from the queue.
		"dynamodb:DeleteItem": {"GetAtt:Table.Arn"},
		"s3:DeleteObject":     {"arn:{AWS::Partition}:s3:::Ref:Bucket/images/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/text/*", "arn:{AWS::Partition}:s3:::Ref:Bucket/uploads/*"},
		"bedrock:InvokeModel": {
			"arn:{AWS::Partition}:bedrock:{AWS::Region}:{AWS::AccountId}:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0",
			"arn:{AWS::Partition}:bedrock:{AWS::Region}:{AWS::AccountId}:inference-profile/global.anthropic.claude-haiku-4-5-20251001-v1:0",
			"arn:{AWS::Partition}:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
			// Each searchable entry embedded once, when EmbedModel is set.
			titanARN,
		},
		"lambda:InvokeFunction": {
			"arn:{AWS::Partition}:lambda:{AWS::Region}:{AWS::AccountId}:function:my-compactor",
			"arn:{AWS::Partition}:lambda:{AWS::Region}:{AWS::AccountId}:function:my-compactor:*",
			compactorARN, compactorARN + ":*",
		},
	},
}

func TestPoliciesAreLeastPrivilege(t *testing.T) {
	for _, params := range []map[string]any{defaults, allOptions, compactorByARN, tokensInSSM} {
		s := load(t, params)
		for name := range functions {
			for _, g := range grants(t, s.function(t, name)) {
				for _, a := range g.actions {
					ok, known := allowed[name][a]
					if !known {
						t.Errorf("%s may %s, which it does not need", name, a)
						continue
					}
					for _, r := range g.resources {
						if !slices.Contains(ok, r) {
							t.Errorf("%s may %s on %s", name, a, r)
						}
					}
				}
			}
		}
	}
}

func TestRestoreCannotWrite(t *testing.T) {
	s := load(t, allOptions)
	for _, g := range grants(t, s.function(t, "RestoreFunction")) {
		for _, a := range g.actions {
			if !slices.Contains([]string{"s3:GetObject", "s3:ListBucket", "dynamodb:GetItem", "dynamodb:BatchGetItem", "secretsmanager:GetSecretValue", "ssm:GetParameter"}, a) {
				t.Errorf("restore may %s", a)
			}
		}
	}
}

// S3 answers a read of a missing object with 403 unless the caller may list
// the bucket. Every function that reads stored objects must tell "never
// stored" (a ref left as text, a leaf built as text) from a failure (a
// retry), so each may list the bucket. Without a condition: S3 documents
// the 404 for a caller allowed s3:ListBucket on the bucket, and nothing
// about how a condition on s3:prefix would take part in that check.
func TestObjectReadersMayListTheBucketSoMissingIsNotFound(t *testing.T) {
	const bucket = "arn:{AWS::Partition}:s3:::Ref:Bucket"
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		for name := range functions {
			var reads bool
			var lists []grant
			for _, g := range grants(t, s.function(t, name)) {
				reads = reads || slices.Contains(g.actions, "s3:GetObject")
				if slices.Contains(g.actions, "s3:ListBucket") {
					lists = append(lists, g)
				}
			}
			if !reads {
				if len(lists) != 0 {
					t.Errorf("%s reads no object but may list the bucket", name)
				}
				continue
			}
			if len(lists) != 1 || !slices.Equal(lists[0].actions, []string{"s3:ListBucket"}) ||
				!slices.Equal(lists[0].resources, []string{bucket}) || len(lists[0].condition) != 0 {
				t.Errorf("%s reads objects; its listing grants are %+v, want one s3:ListBucket on %s without a condition", name, lists, bucket)
			}
		}
	}
}

func TestTheCompactorGrantExistsOnlyWhenConfigured(t *testing.T) {
	has := func(s stack) bool {
		for _, g := range grants(t, s.function(t, "CompactFunction")) {
			if slices.Contains(g.actions, "lambda:InvokeFunction") {
				return true
			}
		}
		return false
	}
	if has(load(t, defaults)) {
		t.Error("compact may invoke a compactor function that is not configured")
	}
	if !has(load(t, allOptions)) {
		t.Error("compact may not invoke the configured compactor function")
	}
}

func TestTableKeepsDataWithTTLAndPointInTimeRecovery(t *testing.T) {
	s := load(t, defaults)
	tbl, err := s.GetDynamoDBTableWithName("Table")
	if err != nil {
		t.Fatal(err)
	}
	if deref(tbl.BillingMode) != "PAY_PER_REQUEST" {
		t.Errorf("billing %q", deref(tbl.BillingMode))
	}
	keys := map[string]string{}
	for _, k := range tbl.KeySchema {
		keys[k.AttributeName] = k.KeyType
	}
	if keys["pk"] != "HASH" || keys["sk"] != "RANGE" || len(keys) != 2 {
		t.Errorf("key schema %v", keys)
	}
	for _, a := range tbl.AttributeDefinitions {
		if a.AttributeType != "S" {
			t.Errorf("attribute %s is %s, want S", a.AttributeName, a.AttributeType)
		}
	}
	if ttl := tbl.TimeToLiveSpecification; ttl == nil || !ttl.Enabled || deref(ttl.AttributeName) != store.AttrExpires {
		t.Errorf("TTL %+v", ttl)
	}
	if p := tbl.PointInTimeRecoverySpecification; p == nil || p.PointInTimeRecoveryEnabled == nil || !*p.PointInTimeRecoveryEnabled {
		t.Error("point-in-time recovery is off")
	}
	if tbl.AWSCloudFormationDeletionPolicy != "Retain" {
		t.Errorf("deletion policy %q", tbl.AWSCloudFormationDeletionPolicy)
	}
}

// The table cannot be deleted by mistake: deletion protection is on unless
// the parameter turns it off.
func TestTableIsDeletionProtectedByDefault(t *testing.T) {
	for _, tt := range []struct {
		params map[string]any
		want   bool
	}{
		{defaults, true},
		{map[string]any{"TableDeletionProtection": "false"}, false},
	} {
		tbl, err := load(t, tt.params).GetDynamoDBTableWithName("Table")
		if err != nil {
			t.Fatal(err)
		}
		if got := tbl.DeletionProtectionEnabled; got == nil || *got != tt.want {
			t.Errorf("with %v: deletion protection %v, want %v", tt.params, got, tt.want)
		}
	}
}

// A deleted or overwritten object stays recoverable as a noncurrent version
// for BackupRetentionDays and is then removed; the table's point-in-time
// recovery window is the same, so a restore finds the images its rows
// name, and a deleted chat leaves the bucket and the table's backups within
// those days (plus the day S3's lifecycle may take). No rule expires a
// current image or text: only chats' deletions remove them.
func TestDeletedObjectsStayRecoverableForTheBackupDaysThenGo(t *testing.T) {
	for _, days := range []string{"", "3"} {
		params := map[string]any{}
		want := 7 // the default, which docs/api.md states
		if days != "" {
			params["BackupRetentionDays"] = days
			want, _ = strconv.Atoi(days)
		}
		s := load(t, params)
		b, err := s.GetS3BucketWithName("Bucket")
		if err != nil {
			t.Fatal(err)
		}
		if b.VersioningConfiguration == nil || b.VersioningConfiguration.Status != "Enabled" {
			t.Fatalf("versioning %+v, want Enabled", b.VersioningConfiguration)
		}
		if b.LifecycleConfiguration == nil {
			t.Fatal("no lifecycle rules")
		}
		var noncurrent []int
		var markers bool
		for _, r := range b.LifecycleConfiguration.Rules {
			if r.Status != "Enabled" {
				continue
			}
			if r.NoncurrentVersionExpiration != nil {
				if deref(r.Prefix) != "" || r.TagFilters != nil || r.ObjectSizeGreaterThan != nil || r.ObjectSizeLessThan != nil {
					t.Errorf("rule %s expires old versions under %q only", deref(r.Id), deref(r.Prefix))
				}
				noncurrent = append(noncurrent, r.NoncurrentVersionExpiration.NoncurrentDays)
			}
			markers = markers || deref(r.ExpiredObjectDeleteMarker)
			if (r.ExpirationInDays != nil || r.ExpirationDate != nil) && deref(r.Prefix) != "uploads/" {
				t.Errorf("rule %s expires current objects under %q: only staged uploads expire by age", deref(r.Id), deref(r.Prefix))
			}
		}
		if !slices.Equal(noncurrent, []int{want}) {
			t.Errorf("noncurrent versions expire after %v days, want %d", noncurrent, want)
		}
		if !markers {
			t.Error("delete markers left without versions are never removed")
		}
		if got := fmt.Sprint(s.recoveryDays["Table"]); got != strconv.Itoa(want) {
			t.Errorf("the table's point-in-time recovery window is %s days, want %d, as long as the bucket keeps deleted versions", got, want)
		}
	}
	// docs/api.md states the default for a deleted chat's data.
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "within 8 days") {
		t.Error("docs/api.md does not say that a deleted chat's images are gone within 8 days (BackupRetentionDays 7, plus a day)")
	}
}

func TestBucketIsEncryptedPrivateAndTLSOnly(t *testing.T) {
	s := load(t, defaults)
	b, err := s.GetS3BucketWithName("Bucket")
	if err != nil {
		t.Fatal(err)
	}
	if b.BucketEncryption == nil || len(b.BucketEncryption.ServerSideEncryptionConfiguration) == 0 ||
		b.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault == nil {
		t.Error("no default encryption")
	}
	pab := b.PublicAccessBlockConfiguration
	if pab == nil {
		t.Fatal("no public access block")
	}
	for name, v := range map[string]*bool{
		"BlockPublicAcls": pab.BlockPublicAcls, "BlockPublicPolicy": pab.BlockPublicPolicy,
		"IgnorePublicAcls": pab.IgnorePublicAcls, "RestrictPublicBuckets": pab.RestrictPublicBuckets,
	} {
		if v == nil || !*v {
			t.Errorf("%s is not true", name)
		}
	}
	pol, err := s.GetS3BucketPolicyWithName("BucketPolicy")
	if err != nil {
		t.Fatal(err)
	}
	if pol.Bucket != "Ref:Bucket" {
		t.Errorf("policy is on %q", pol.Bucket)
	}
	if !deniesInsecureTransport(pol.PolicyDocument, "GetAtt:Bucket.Arn", "GetAtt:Bucket.Arn/*") {
		t.Errorf("the bucket policy does not deny requests without TLS on the bucket and its objects: %v", pol.PolicyDocument)
	}
}

func deniesInsecureTransport(doc any, resources ...string) bool {
	d, _ := doc.(map[string]any)
	sts, _ := d["Statement"].([]any)
	for _, st := range sts {
		m, _ := st.(map[string]any)
		cond, _ := m["Condition"].(map[string]any)
		b, _ := cond["Bool"].(map[string]any)
		if m["Effect"] != "Deny" || m["Principal"] != "*" || fmt.Sprint(b["aws:SecureTransport"]) != "false" {
			continue
		}
		got := strs(m["Resource"])
		all := true
		for _, r := range resources {
			all = all && slices.Contains(got, r)
		}
		if all {
			return true
		}
	}
	return false
}

func TestQueueOutlastsTheCompactFunctionAndRedrivesToADLQ(t *testing.T) {
	s := load(t, defaults)
	q, err := s.GetSQSQueueWithName("BuildQueue")
	if err != nil {
		t.Fatal(err)
	}
	compact := s.function(t, "CompactFunction")
	if q.VisibilityTimeout == nil || compact.Timeout == nil || *q.VisibilityTimeout < 6**compact.Timeout {
		t.Errorf("visibility %v is under 6 x the compact timeout %v", deref(q.VisibilityTimeout), deref(compact.Timeout))
	}
	rp, _ := q.RedrivePolicy.(map[string]any)
	if rp["deadLetterTargetArn"] != "GetAtt:BuildDeadLetterQueue.Arn" {
		t.Errorf("redrive target %v", rp["deadLetterTargetArn"])
	}
	// Every 10 s retry of a failed build is one more receive: the DLQ must
	// take only what has failed for hours, not an outage of minutes.
	n, _ := rp["maxReceiveCount"].(float64)
	if outlasts := time.Duration(n) * memory.DefaultRetry; outlasts < 2*time.Hour || n > 1000 {
		t.Errorf("maxReceiveCount %v sends a build to the DLQ after %v of retries; want at least 2h (and at most SQS's 1000 receives)", rp["maxReceiveCount"], outlasts)
	}
	if _, err := s.GetSQSQueueWithName("BuildDeadLetterQueue"); err != nil {
		t.Error(err)
	}
	qp, err := s.GetSQSQueuePolicyWithName("BuildQueuePolicy")
	if err != nil || !deniesInsecureTransport(qp.PolicyDocument, "GetAtt:BuildQueue.Arn", "GetAtt:BuildDeadLetterQueue.Arn") {
		t.Errorf("the queues do not refuse requests without TLS (%v)", err)
	}
}

func TestAMessageInTheDLQRaisesAnAlarm(t *testing.T) {
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		a, err := s.GetCloudWatchAlarmWithName("DeadLetterAlarm")
		if err != nil {
			t.Fatal(err)
		}
		if deref(a.Namespace) != "AWS/SQS" || deref(a.MetricName) != "ApproximateNumberOfMessagesVisible" {
			t.Errorf("alarm on %s %s", deref(a.Namespace), deref(a.MetricName))
		}
		if len(a.Dimensions) != 1 || a.Dimensions[0].Name != "QueueName" || a.Dimensions[0].Value != "GetAtt:BuildDeadLetterQueue.QueueName" {
			t.Errorf("alarm dimensions %+v", a.Dimensions)
		}
		if a.ComparisonOperator != "GreaterThanThreshold" || a.Threshold == nil || *a.Threshold != 0 {
			t.Errorf("alarm fires on %s %v", a.ComparisonOperator, a.Threshold)
		}
		if !slices.Equal(a.AlarmActions, []string{topicOf(params)}) {
			t.Errorf("alarm actions %v, want %s", a.AlarmActions, topicOf(params))
		}
	}
}

// The DLQ holds builds that never succeeded: deleting or replacing the
// stack's queue must not take them along.
func TestDeadLetterQueueIsRetained(t *testing.T) {
	q, err := load(t, defaults).GetSQSQueueWithName("BuildDeadLetterQueue")
	if err != nil {
		t.Fatal(err)
	}
	if q.AWSCloudFormationDeletionPolicy != "Retain" || q.AWSCloudFormationUpdateReplacePolicy != "Retain" {
		t.Errorf("DLQ deletion policy %q, update replace policy %q, want Retain for both",
			q.AWSCloudFormationDeletionPolicy, q.AWSCloudFormationUpdateReplacePolicy)
	}
}

func TestCompactReportsBatchItemFailuresAndScalesToAThousandChats(t *testing.T) {
	s := load(t, defaults)
	var found bool
	for name, m := range s.GetAllLambdaEventSourceMappingResources() {
		if deref(m.EventSourceArn) != "GetAtt:BuildQueue.Arn" {
			continue
		}
		found = true
		if m.FunctionName != "Ref:CompactFunction" {
			t.Errorf("%s feeds %s", name, m.FunctionName)
		}
		if !slices.Equal(m.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) {
			t.Errorf("%s: response types %v", name, m.FunctionResponseTypes)
		}
		if m.ScalingConfig == nil || m.ScalingConfig.MaximumConcurrency == nil || *m.ScalingConfig.MaximumConcurrency < 2 {
			t.Errorf("%s: no MaximumConcurrency (2 or more)", name)
		}
		// The defaults carry 1,000 active chats at 0.4 builds/s each and
		// 3 s a build (docs/scale.md): 1,200 builds at once.
		if m.ScalingConfig != nil && m.ScalingConfig.MaximumConcurrency != nil && m.BatchSize != nil &&
			*m.ScalingConfig.MaximumConcurrency**m.BatchSize < 1200 {
			t.Errorf("%s: %d invocations x %d builds run at once, want at least 1,200", name, *m.ScalingConfig.MaximumConcurrency, *m.BatchSize)
		}
		if m.BatchSize != nil && *m.BatchSize > 10 && (m.MaximumBatchingWindowInSeconds == nil || *m.MaximumBatchingWindowInSeconds < 1) {
			t.Errorf("%s: batches of %d need a batching window of at least 1 s", name, *m.BatchSize)
		}
		if env := s.function(t, "CompactFunction").Environment; env == nil || env.Variables["DURACHAT_BATCH_BUILDS"] != fmt.Sprint(deref(m.BatchSize)) {
			t.Errorf("the compact function does not run a whole batch (%d) at once", deref(m.BatchSize))
		}
	}
	if !found {
		t.Fatal("nothing consumes BuildQueue")
	}
}

// routeAuth is what the test expects of one API route.
type routeAuth struct {
	key, integration string
	public           bool
}

var routes = map[string]routeAuth{
	"BeforeRequestRoute": {"POST /v1/chats/{chat}/hooks/before-request", "RestoreIntegration", false},
	"AfterToolRoute":     {"POST /v1/chats/{chat}/hooks/after-tool", "OffloadIntegration", false},
	"OffloadInputRoute":  {"POST /v1/chats/{chat}/hooks/offload-input", "OffloadIntegration", false},
	"UploadsRoute":       {"POST /v1/chats/{chat}/uploads", "OffloadIntegration", false},
	"ViewRoute":          {"GET /v1/chats/{chat}/view", "ViewIntegration", false},
	"HealthRoute":        {"GET /healthz", "MemoryIntegration", true},
	"OpenAPIRoute":       {"GET /v1/openapi.json", "MemoryIntegration", true},
	"UIRoute":            {"GET /ui", "MemoryIntegration", true},
	"UIFilesRoute":       {"GET /ui/{proxy+}", "MemoryIntegration", true},
	"McpPostRoute":       {"POST /v1/mcp", "MemoryIntegration", false},
	"McpGetRoute":        {"GET /v1/mcp", "MemoryIntegration", false},
	// The Protected Resource Metadata: public, as discovery documents are.
	"ResourceMetadataRoute":    {"GET /.well-known/oauth-protected-resource", "MemoryIntegration", true},
	"McpResourceMetadataRoute": {"GET /.well-known/oauth-protected-resource/v1/mcp", "MemoryIntegration", true},
	"DefaultRoute":             {"$default", "MemoryIntegration", false},
}

func TestJWTAuthorizerIsOptional(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]any
		jwt    bool
	}{{"without issuer", defaults, false}, {"with issuer and audience", allOptions, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := load(t, tc.params)
			a, err := s.GetApiGatewayV2AuthorizerWithName("JwtAuthorizer")
			if err != nil {
				t.Fatal(err)
			}
			if a.AWSCloudFormationCondition != "UseJwtAuthorizer" || a.AuthorizerType != "JWT" {
				t.Errorf("authorizer condition %q type %q", a.AWSCloudFormationCondition, a.AuthorizerType)
			}
			if tc.jwt && (a.JwtConfiguration == nil || deref(a.JwtConfiguration.Issuer) != "https://issuer.example.com/" ||
				!slices.Equal(a.JwtConfiguration.Audience, []string{"client-a", "client-b"})) {
				t.Errorf("JWT configuration %+v", a.JwtConfiguration)
			}
			all := s.GetAllApiGatewayV2RouteResources()
			if len(all) != len(routes) {
				t.Errorf("%d routes, want %d", len(all), len(routes))
			}
			for name, want := range routes {
				r, err := s.GetApiGatewayV2RouteWithName(name)
				if err != nil {
					t.Fatal(err)
				}
				if r.RouteKey != want.key || deref(r.Target) != "integrations/Ref:"+want.integration {
					t.Errorf("%s: %s -> %s", name, r.RouteKey, deref(r.Target))
				}
				wantType, wantAuthorizer := "NONE", ""
				if tc.jwt && !want.public {
					wantType, wantAuthorizer = "JWT", "Ref:JwtAuthorizer"
				}
				if deref(r.AuthorizationType) != wantType || deref(r.AuthorizerId) != wantAuthorizer {
					t.Errorf("%s: authorization %s %s, want %s %s", name, deref(r.AuthorizationType), deref(r.AuthorizerId), wantType, wantAuthorizer)
				}
			}
		})
	}
}

func TestAPIIntegrationsUsePayloadV2AndMayInvoke(t *testing.T) {
	s := load(t, defaults)
	for _, name := range []string{"Restore", "Offload", "Memory", "View"} {
		in, err := s.GetApiGatewayV2IntegrationWithName(name + "Integration")
		if err != nil {
			t.Fatal(err)
		}
		if in.IntegrationType != "AWS_PROXY" || deref(in.PayloadFormatVersion) != "2.0" || deref(in.IntegrationUri) != "GetAtt:"+name+"Function.Arn" {
			t.Errorf("%sIntegration: %s %s %s", name, in.IntegrationType, deref(in.PayloadFormatVersion), deref(in.IntegrationUri))
		}
		p, err := s.GetLambdaPermissionWithName(name + "ApiPermission")
		if err != nil {
			t.Fatal(err)
		}
		if p.FunctionName != "Ref:"+name+"Function" || p.Principal != "apigateway.amazonaws.com" || !strings.Contains(deref(p.SourceArn), "Ref:HttpApi/") {
			t.Errorf("%sApiPermission: %+v", name, p)
		}
	}
}

func TestOutputsNameTheAPIAndStores(t *testing.T) {
	s := load(t, defaults)
	want := map[string]string{
		"ApiUrl":     "GetAtt:HttpApi.ApiEndpoint",
		"TableName":  "Ref:Table",
		"BucketName": "Ref:Bucket",
		"QueueUrl":   "Ref:BuildQueue",
	}
	for name, v := range want {
		out, ok := s.Outputs[name]
		if !ok {
			t.Errorf("no output %s", name)
			continue
		}
		if fmt.Sprint(out.Value) != v {
			t.Errorf("output %s = %v, want %s", name, out.Value, v)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// A new account's concurrency quota can be far below what reserving
// would need (Lambda keeps 100 unreserved), so no function reserves
// concurrency unless its parameter asks; the compact function's fan-out
// stays bounded by its event source mapping either way.
func TestNoFunctionReservesConcurrencyUnlessAsked(t *testing.T) {
	asked := map[string]any{"RestoreConcurrency": "20", "OffloadConcurrency": "21", "MemoryConcurrency": "40", "ViewConcurrency": "41", "CompactConcurrency": "5"}
	resources := func(params map[string]any) map[string]any {
		r, _ := load(t, params).raw["Resources"].(map[string]any)
		return r
	}
	byDefault, reserved := resources(defaults), resources(asked)
	for fn, param := range map[string]string{"RestoreFunction": "RestoreConcurrency", "OffloadFunction": "OffloadConcurrency",
		"MemoryFunction": "MemoryConcurrency", "ViewFunction": "ViewConcurrency", "CompactFunction": "CompactConcurrency"} {
		props := byDefault[fn].(map[string]any)["Properties"].(map[string]any)
		if got, ok := props["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s reserves %v by default, want none", fn, got)
		}
		props = reserved[fn].(map[string]any)["Properties"].(map[string]any)
		if got := fmt.Sprint(props["ReservedConcurrentExecutions"]); got != asked[param] {
			t.Errorf("%s reserves %s with %s=%s", fn, got, param, asked[param])
		}
	}
}

// Retention deletes idle chats hourly: a schedule puts the sweep message on
// the build queue (the compact function consumes it), through a role that
// may send to that queue and nothing else.
func TestRetentionSweepIsScheduledOntoTheBuildQueue(t *testing.T) {
	s := load(t, defaults)
	sch, err := s.GetSchedulerScheduleWithName("RetentionSchedule")
	if err != nil {
		t.Fatal(err)
	}
	if sch.ScheduleExpression != "rate(1 hour)" || sch.Target == nil || sch.Target.Arn != "GetAtt:BuildQueue.Arn" ||
		deref(sch.Target.Input) != `{"kind":"expire"}` || sch.Target.RoleArn != "GetAtt:RetentionScheduleRole.Arn" {
		t.Fatalf("schedule %+v (target %+v), want the expire message hourly on the build queue", sch, sch.Target)
	}
	role, err := s.GetIAMRoleWithName("RetentionScheduleRole")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(role.Policies)
	if !strings.Contains(string(doc), `"Action":"sqs:SendMessage"`) || !strings.Contains(string(doc), `"Resource":"GetAtt:BuildQueue.Arn"`) || strings.Count(string(doc), `"Action"`) != 1 {
		t.Fatalf("the schedule's role may %s, want only sqs:SendMessage on the build queue", doc)
	}
}

// The HTTP functions read their bearer tokens from the one secret (or
// SecureString parameter) ApiTokensSecret names, with the one read action
// its store has, and only when it is set; the tokens are never in the
// functions' environment, and compaction, which serves no request, may
// not read them.
func TestBearerTokensAreReadFromTheNamedSecretOnly(t *testing.T) {
	for _, tt := range []struct {
		name           string
		params         map[string]any
		action, secret string
	}{
		{"none", defaults, "", ""},
		{"Secrets Manager", allOptions, "secretsmanager:GetSecretValue", tokensSecretARN},
		{"SSM", tokensInSSM, "ssm:GetParameter", tokensParameterARN},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := load(t, tt.params)
			for name, p := range functions {
				f := s.function(t, name)
				var reads []string
				for _, g := range grants(t, f) {
					for _, a := range g.actions {
						if strings.HasPrefix(a, "secretsmanager:") || strings.HasPrefix(a, "ssm:") || strings.HasPrefix(a, "kms:") {
							reads = append(reads, a+" "+strings.Join(g.resources, ","))
						}
					}
				}
				var want []string
				if tt.action != "" && p != config.Compact {
					want = []string{tt.action + " " + tt.secret}
				}
				if !slices.Equal(reads, want) {
					t.Errorf("%s may %v, want %v", name, reads, want)
				}
				env := map[string]string{}
				if f.Environment != nil {
					for k, v := range f.Environment.Variables {
						env[k] = fmt.Sprint(v)
					}
				}
				if _, ok := env[config.EnvTokens]; ok {
					t.Errorf("%s has %s in its environment", name, config.EnvTokens)
				}
				if p != config.Compact && env[config.EnvTokensSecret] != tt.secret {
					t.Errorf("%s: %s=%q, want %q", name, config.EnvTokensSecret, env[config.EnvTokensSecret], tt.secret)
				}
			}
		})
	}
}

// sam deploy --guided re-asks a NoEcho parameter until it gets an answer,
// and offers each other parameter's default: with every parameter
// defaulted and none NoEcho, a guided deploy takes Enter for each (with a
// JWT issuer, two answers: JwtIssuer and JwtAudience).
func TestAGuidedDeployNeedsNoAnswerForAParameterItDoesNotUse(t *testing.T) {
	params, _ := writtenTemplate(t)["Parameters"].(map[string]any)
	for name, p := range params {
		pm, _ := p.(map[string]any)
		if _, ok := pm["Default"]; !ok {
			t.Errorf("%s has no default: a guided deploy must answer it", name)
		}
		if pm["NoEcho"] == true {
			t.Errorf("%s is NoEcho: a guided deploy cannot skip it, and secrets belong in ApiTokensSecret's store", name)
		}
	}
}

// The offload function records the images it stores for their chats: it
// may read and write only the partitions that keeps (the chat's, the
// chat index's, the image's references and lease), and read the health
// check's key, nothing else of the table.
func TestOffloadWritesOnlyReferencePartitions(t *testing.T) {
	partition := func(pk string) string { first, _, _ := strings.Cut(pk, "/"); return first + "/*" }
	want := []string{partition(store.ChatPK("t", "c")), partition(store.IndexPK("t")), partition(store.RefPK("t", "0123456789abcdef")), "healthz"}
	slices.Sort(want)
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		n := 0
		for _, g := range grants(t, s.function(t, "OffloadFunction")) {
			if !slices.ContainsFunc(g.actions, func(a string) bool { return strings.HasPrefix(a, "dynamodb:") }) {
				continue
			}
			n++
			like, _ := g.condition["ForAllValues:StringLike"].(map[string]any)
			got := strs(like["dynamodb:LeadingKeys"])
			slices.Sort(got)
			if len(g.condition) != 1 || len(like) != 1 || !slices.Equal(got, want) {
				t.Errorf("offload may use the table with condition %v, want dynamodb:LeadingKeys limited to %v", g.condition, want)
			}
		}
		if n == 0 {
			t.Error("offload may not use the table: it cannot record the images it stores for their chats")
		}
	}
}

// TestRestoreReadsOnlyChatPartitions: before-request reads the table only
// to tell which images the chat names (the chat's identity and its
// references), so it may read the chats' partitions and the health
// check's key, and no other.
func TestRestoreReadsOnlyChatPartitions(t *testing.T) {
	partition := func(pk string) string { first, _, _ := strings.Cut(pk, "/"); return first + "/*" }
	want := []string{partition(store.ChatPK("t", "c")), "healthz"}
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		n := 0
		for _, g := range grants(t, s.function(t, "RestoreFunction")) {
			if !slices.ContainsFunc(g.actions, func(a string) bool { return strings.HasPrefix(a, "dynamodb:") }) {
				continue
			}
			n++
			like, _ := g.condition["ForAllValues:StringLike"].(map[string]any)
			got := strs(like["dynamodb:LeadingKeys"])
			slices.Sort(got)
			if len(g.condition) != 1 || len(like) != 1 || !slices.Equal(got, want) {
				t.Errorf("restore may read the table with condition %v, want dynamodb:LeadingKeys limited to %v", g.condition, want)
			}
		}
		if n == 0 {
			t.Error("restore may not read the table: it cannot tell which images the chat names")
		}
	}
}
