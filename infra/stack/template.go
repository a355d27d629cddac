package stack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// Template is what the stack reads of template.yaml, with the parameters
// and physical resource names of one local deployment resolved.
type Template struct {
	Functions    map[string]FunctionDef // by logical id
	Routes       []Route
	Integrations map[string]Integration // by logical id
	Authorizers  map[string]Authorizer  // by logical id; only those whose condition holds
	Sources      []EventSource
	Queues       map[string]QueueDef // by logical id
	Tables       map[string]TableDef // by logical id
	Buckets      []string            // logical ids
	Alarms       map[string]AlarmDef // by logical id
}

// FunctionDef is an AWS::Serverless::Function.
type FunctionDef struct {
	Name     string
	Timeout  int // seconds
	MemoryMB int
	// Reserved is its ReservedConcurrentExecutions; 0 when it reserves
	// none and draws on the account's unreserved concurrency.
	Reserved int
	Env      map[string]string
}

// Route is an AWS::ApiGatewayV2::Route.
type Route struct {
	Name        string
	Key         string // "POST /v1/chats/{chat}/hooks/before-request" or "$default"
	Integration string // logical id of the integration
	AuthType    string // NONE or JWT
	Authorizer  string // logical id, when AuthType is JWT
}

// Integration is an AWS_PROXY AWS::ApiGatewayV2::Integration.
type Integration struct {
	Function      string // logical id
	PayloadFormat string
	TimeoutMillis int
}

// Authorizer is a JWT AWS::ApiGatewayV2::Authorizer.
type Authorizer struct {
	IdentitySource []string
	Issuer         string
	Audience       []string
}

// EventSource is an AWS::Lambda::EventSourceMapping from an SQS queue.
type EventSource struct {
	Function       string // logical id
	Queue          string // logical id (from a placeholder) or the queue's name
	QueueARN       string // as resolved
	BatchSize      int
	ReportFailures bool // FunctionResponseTypes has ReportBatchItemFailures
	MaxConcurrency int
	BatchWindow    int // MaximumBatchingWindowInSeconds
}

// QueueDef is an AWS::SQS::Queue.
type QueueDef struct {
	VisibilityTimeout int // seconds
	RetentionPeriod   int // seconds
	DeadLetterQueue   string
	MaxReceiveCount   int
}

// AlarmDef is an AWS::CloudWatch::Alarm on one metric.
type AlarmDef struct {
	Namespace, MetricName string
	Dimensions            map[string]string // name -> value, as resolved
	Statistic             string
	Threshold             float64
	ComparisonOperator    string
}

// Breaches reports whether a datapoint of value breaches the alarm's
// threshold: the condition under which CloudWatch sets it to ALARM (for
// the alarm's evaluation periods).
func (a AlarmDef) Breaches(value float64) (bool, error) {
	switch a.ComparisonOperator {
	case "GreaterThanThreshold":
		return value > a.Threshold, nil
	case "GreaterThanOrEqualToThreshold":
		return value >= a.Threshold, nil
	case "LessThanThreshold":
		return value < a.Threshold, nil
	case "LessThanOrEqualToThreshold":
		return value <= a.Threshold, nil
	}
	return false, fmt.Errorf("comparison %q is not emulated", a.ComparisonOperator)
}

// TableDef is an AWS::DynamoDB::Table.
type TableDef struct {
	Attributes []AttributeDef
	Keys       []KeySchema
}

// AttributeDef is one of a table's AttributeDefinitions.
type AttributeDef struct{ AttributeName, AttributeType string }

// KeySchema is one of a table's KeySchema elements.
type KeySchema struct{ AttributeName, KeyType string }

// Physical resolves the resources of a template to this deployment's: Ref
// of a logical id and Fn::GetAtt of its attributes. A name it does not know
// resolves to a placeholder, "Ref:Name" or "GetAtt:Name.Attr".
type Physical struct {
	Refs  map[string]string // logical id -> Ref value
	Attrs map[string]string // "Name.Attr" -> value
}

// Pseudo parameters of the local deployment.
const (
	Region    = "us-east-1"
	AccountID = "000000000000"
	StackName = "durachat-local"
)

// ReadTemplate reads the template at path with params overriding the
// parameters' defaults, resolving resources through phys.
func ReadTemplate(path string, params map[string]string, phys Physical) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the template: %w", err)
	}
	doc, err := resolve(data, params, phys)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", path, err)
	}
	return parseTemplate(doc)
}

// rawTemplate is the resolved template's resources.
type rawTemplate struct {
	Resources map[string]struct {
		Type       string
		Condition  string
		Properties json.RawMessage
	}
}

func parseTemplate(doc []byte) (*Template, error) {
	var raw rawTemplate
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("reading the resolved template: %w", err)
	}
	t := &Template{
		Functions:    map[string]FunctionDef{},
		Integrations: map[string]Integration{},
		Authorizers:  map[string]Authorizer{},
		Queues:       map[string]QueueDef{},
		Tables:       map[string]TableDef{},
		Alarms:       map[string]AlarmDef{},
	}
	names := make([]string, 0, len(raw.Resources))
	for name := range raw.Resources {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		r := raw.Resources[name]
		if err := t.add(name, r.Type, r.Properties); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", name, r.Type, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Template) add(name, typ string, props json.RawMessage) error {
	switch typ {
	case "AWS::Serverless::Function":
		var p struct {
			Timeout                      int
			MemorySize                   int
			ReservedConcurrentExecutions number
			Environment                  struct{ Variables map[string]any }
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		env := map[string]string{}
		for k, v := range p.Environment.Variables {
			env[k] = scalar(v)
		}
		t.Functions[name] = FunctionDef{Name: name, Timeout: or(p.Timeout, 3), MemoryMB: or(p.MemorySize, 128),
			Reserved: int(p.ReservedConcurrentExecutions), Env: env}
	case "AWS::ApiGatewayV2::Route":
		var p struct {
			RouteKey          string
			Target            string
			AuthorizationType string
			AuthorizerId      string
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		target, ok := strings.CutPrefix(p.Target, "integrations/")
		if !ok {
			return fmt.Errorf("target %q is not integrations/<id>", p.Target)
		}
		t.Routes = append(t.Routes, Route{Name: name, Key: p.RouteKey, Integration: logicalOf(target),
			AuthType: or(p.AuthorizationType, "NONE"), Authorizer: logicalOf(p.AuthorizerId)})
	case "AWS::ApiGatewayV2::Integration":
		var p struct {
			IntegrationType      string
			IntegrationUri       string
			PayloadFormatVersion string
			TimeoutInMillis      int
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		if p.IntegrationType != "AWS_PROXY" {
			return fmt.Errorf("integration type %q: only AWS_PROXY is emulated", p.IntegrationType)
		}
		t.Integrations[name] = Integration{Function: functionOfARN(p.IntegrationUri),
			PayloadFormat: p.PayloadFormatVersion, TimeoutMillis: or(p.TimeoutInMillis, 30000)}
	case "AWS::ApiGatewayV2::Authorizer":
		var p struct {
			AuthorizerType   string
			IdentitySource   []string
			JwtConfiguration struct {
				Issuer   string
				Audience []string
			}
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		if p.AuthorizerType != "JWT" {
			return fmt.Errorf("authorizer type %q: only JWT is emulated", p.AuthorizerType)
		}
		t.Authorizers[name] = Authorizer{IdentitySource: p.IdentitySource, Issuer: p.JwtConfiguration.Issuer, Audience: p.JwtConfiguration.Audience}
	case "AWS::Lambda::EventSourceMapping":
		var p struct {
			FunctionName                   string
			EventSourceArn                 string
			BatchSize                      number
			FunctionResponseTypes          []string
			MaximumBatchingWindowInSeconds number
			ScalingConfig                  struct{ MaximumConcurrency number }
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		es := EventSource{Function: logicalOf(p.FunctionName), Queue: queueOfARN(p.EventSourceArn), QueueARN: p.EventSourceArn,
			BatchSize: or(int(p.BatchSize), 10), MaxConcurrency: or(int(p.ScalingConfig.MaximumConcurrency), 5),
			BatchWindow: int(p.MaximumBatchingWindowInSeconds)}
		for _, rt := range p.FunctionResponseTypes {
			es.ReportFailures = es.ReportFailures || rt == "ReportBatchItemFailures"
		}
		t.Sources = append(t.Sources, es)
	case "AWS::SQS::Queue":
		var p struct {
			VisibilityTimeout      int
			MessageRetentionPeriod int
			RedrivePolicy          struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
				MaxReceiveCount     int    `json:"maxReceiveCount"`
			}
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		q := QueueDef{VisibilityTimeout: or(p.VisibilityTimeout, 30), RetentionPeriod: or(p.MessageRetentionPeriod, 345600),
			MaxReceiveCount: p.RedrivePolicy.MaxReceiveCount}
		if p.RedrivePolicy.DeadLetterTargetArn != "" {
			q.DeadLetterQueue = queueOfARN(p.RedrivePolicy.DeadLetterTargetArn)
		}
		t.Queues[name] = q
	case "AWS::DynamoDB::Table":
		var p struct {
			AttributeDefinitions []AttributeDef
			KeySchema            []KeySchema
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		t.Tables[name] = TableDef{Attributes: p.AttributeDefinitions, Keys: p.KeySchema}
	case "AWS::S3::Bucket":
		t.Buckets = append(t.Buckets, name)
	case "AWS::CloudWatch::Alarm":
		var p struct {
			Namespace, MetricName string
			Dimensions            []struct{ Name, Value string }
			Statistic             string
			Threshold             float64
			ComparisonOperator    string
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return err
		}
		a := AlarmDef{Namespace: p.Namespace, MetricName: p.MetricName, Dimensions: map[string]string{},
			Statistic: p.Statistic, Threshold: p.Threshold, ComparisonOperator: p.ComparisonOperator}
		for _, d := range p.Dimensions {
			a.Dimensions[d.Name] = d.Value
		}
		t.Alarms[name] = a
	}
	return nil
}

// The placeholders of unresolved names, and the ARNs the stack gives its
// resources, from which the logical id is read back.
func logicalOf(s string) string {
	if v, ok := strings.CutPrefix(s, "Ref:"); ok {
		return v
	}
	return s
}

// FunctionARN is the ARN the stack gives the function with logical id name.
func FunctionARN(name string) string {
	return "arn:aws:lambda:" + Region + ":" + AccountID + ":function:" + name
}

func functionOfARN(arn string) string {
	if v, ok := strings.CutPrefix(arn, "GetAtt:"); ok {
		return strings.TrimSuffix(v, ".Arn")
	}
	return arn[strings.LastIndex(arn, ":")+1:]
}

// QueueARN is the ARN of the queue named name, as the local SQS server
// gives it.
func QueueARN(name string) string {
	return "arn:aws:sqs:" + Region + ":" + AccountID + ":" + name
}

func queueOfARN(arn string) string {
	if v, ok := strings.CutPrefix(arn, "GetAtt:"); ok {
		return strings.TrimSuffix(v, ".Arn")
	}
	return arn[strings.LastIndex(arn, ":")+1:]
}

// number is a whole-number property written as a number, or as the string
// a Ref to a Number parameter resolves to.
type number int

func (n *number) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		*n = number(v)
		return nil
	}
	var v int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*n = number(v)
	return nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// NoValue stands for a Ref to AWS::NoValue until the key or list element
// holding it is removed, as CloudFormation does.
const NoValue = "{AWS::NoValue}"

// resolve resolves the template's intrinsic functions: parameters from
// their defaults and params, conditions, and resources through phys.
// Resources whose condition is false are removed.
func resolve(data []byte, params map[string]string, phys Physical) ([]byte, error) {
	long, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(long, &doc); err != nil {
		return nil, err
	}
	declared, _ := doc["Parameters"].(map[string]any)
	for name, v := range params {
		p, ok := declared[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no parameter %s", name)
		}
		p["Default"] = v
	}
	r := &resolver{doc: doc, phys: phys, conditions: map[string]bool{}}
	conds, _ := doc["Conditions"].(map[string]any)
	for name := range conds {
		if _, err := r.condition(name, nil); err != nil {
			return nil, err
		}
	}
	resources, _ := doc["Resources"].(map[string]any)
	for name, res := range resources {
		m, _ := res.(map[string]any)
		if c, ok := m["Condition"].(string); ok && !r.conditions[c] {
			delete(resources, name)
		}
	}
	delete(doc, "Conditions")
	delete(doc, "Outputs")
	in, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	out, err := intrinsics.ProcessJSON(in, &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
		"Ref":        r.ref,
		"Fn::GetAtt": r.getAtt,
		"Fn::Sub":    r.sub,
		"Fn::If":     r.fnIf,
	}})
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, err
	}
	return json.Marshal(DropNoValue(v))
}

type resolver struct {
	doc        map[string]any
	phys       Physical
	conditions map[string]bool
}

// condition evaluates the named condition (recursively, for a condition
// naming another), with the parameters' values.
func (r *resolver) condition(name string, seen []string) (bool, error) {
	if v, ok := r.conditions[name]; ok {
		return v, nil
	}
	for _, s := range seen {
		if s == name {
			return false, fmt.Errorf("condition %s refers to itself", name)
		}
	}
	conds, _ := r.doc["Conditions"].(map[string]any)
	expr, ok := conds[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %s", name)
	}
	var err error
	in, _ := json.Marshal(map[string]any{"Parameters": r.doc["Parameters"], "Value": expr})
	out, perr := intrinsics.ProcessJSON(in, &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
		"Condition": func(_ string, input any, _ any) any {
			n, _ := input.(string)
			v, cerr := r.condition(n, append(seen, name))
			if cerr != nil {
				err = cerr
			}
			return v
		},
		"Ref": r.ref,
	}})
	if perr != nil {
		return false, perr
	}
	if err != nil {
		return false, err
	}
	var v struct{ Value any }
	if err := json.Unmarshal(out, &v); err != nil {
		return false, err
	}
	b, ok := v.Value.(bool)
	if !ok {
		return false, fmt.Errorf("condition %s is not a boolean: %v", name, v.Value)
	}
	r.conditions[name] = b
	return b, nil
}

func (r *resolver) ref(_ string, input any, _ any) any {
	name, _ := input.(string)
	switch name {
	case "AWS::NoValue":
		return NoValue
	case "AWS::Region":
		return Region
	case "AWS::AccountId":
		return AccountID
	case "AWS::Partition":
		return "aws"
	case "AWS::StackName":
		return StackName
	case "AWS::URLSuffix":
		return "amazonaws.com"
	}
	params, _ := r.doc["Parameters"].(map[string]any)
	if p, ok := params[name].(map[string]any); ok {
		return p["Default"]
	}
	if v, ok := r.phys.Refs[name]; ok {
		return v
	}
	return "Ref:" + name
}

func (r *resolver) getAtt(_ string, input any, _ any) any {
	var name string
	switch v := input.(type) {
	case string:
		name = v
	case []any:
		parts := make([]string, len(v))
		for i, p := range v {
			parts[i] = fmt.Sprint(p)
		}
		name = strings.Join(parts, ".")
	}
	if v, ok := r.phys.Attrs[name]; ok {
		return v
	}
	logical, attr, _ := strings.Cut(name, ".")
	if attr == "Arn" {
		if _, ok := r.resourceType(logical, "AWS::Serverless::Function"); ok {
			return FunctionARN(logical)
		}
	}
	return "GetAtt:" + name
}

func (r *resolver) resourceType(name, want string) (string, bool) {
	resources, _ := r.doc["Resources"].(map[string]any)
	m, _ := resources[name].(map[string]any)
	typ, _ := m["Type"].(string)
	return typ, typ == want
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (r *resolver) sub(_ string, input any, _ any) any {
	return Sub(input, func(name string) string {
		if strings.Contains(name, ".") && !strings.HasPrefix(name, "AWS::") {
			return scalar(r.getAtt("", name, nil))
		}
		return scalar(r.ref("", name, nil))
	})
}

// Sub resolves the input of Fn::Sub, a string or [string, variables]:
// each ${name} is its variable, else what resolve answers for it.
func Sub(input any, resolve func(name string) string) any {
	src, vars := "", map[string]any{}
	switch v := input.(type) {
	case string:
		src = v
	case []any:
		if len(v) != 2 {
			return nil
		}
		src, _ = v[0].(string)
		vars, _ = v[1].(map[string]any)
	}
	return subVar.ReplaceAllStringFunc(src, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return scalar(v)
		}
		return resolve(name)
	})
}

func (r *resolver) fnIf(_ string, input any, _ any) any {
	args, _ := input.([]any)
	if len(args) != 3 {
		return nil
	}
	name, _ := args[0].(string)
	if r.conditions[name] {
		return args[1]
	}
	return args[2]
}

// DropNoValue removes every map entry and list element that is NoValue,
// as CloudFormation does with a Ref to AWS::NoValue; it returns v.
func DropNoValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == NoValue {
				delete(x, k)
				continue
			}
			x[k] = DropNoValue(e)
		}
	case []any:
		out := x[:0]
		for _, e := range x {
			if e != NoValue {
				out = append(out, DropNoValue(e))
			}
		}
		return out
	}
	return v
}

// BuildTargets reads the Makefile's build-<LogicalId> targets (the ones
// sam build runs) and returns, for each function, the package it builds:
// "./functions/restore".
func BuildTargets(makefile string) (map[string]string, error) {
	data, err := os.ReadFile(makefile)
	if err != nil {
		return nil, fmt.Errorf("reading the Makefile: %w", err)
	}
	out := map[string]string{}
	for _, m := range buildTarget.FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = m[2]
	}
	return out, nil
}

var buildTarget = regexp.MustCompile(`(?m)^build-(\w+):\s*\n\t[^\n]*?(\./functions/[\w-]+)\s*$`)
