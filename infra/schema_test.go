package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/schema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// samSchemaURL names goformation's bundled SAM schema inside the compiler.
const samSchemaURL = "sam.schema.json"

// samSchema validates a resolved template against the SAM JSON schema
// goformation ships. That schema lists every resource type (over a
// thousand) as one anyOf under Resources: compiling all of it takes the
// validator many seconds, and a failing anyOf says only that no branch
// matched. So each check compiles only the definitions the template's
// resource types reach, validates the top level against the schema's
// root with the anyOf left out, and each resource against the definition
// of its own Type, which gives errors naming the property.
type samSchema struct {
	root map[string]any // the bundled schema, decoded
	defs map[string]any // its definitions, by name
}

func loadSAMSchema(t *testing.T) *samSchema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema.SamSchema))
	if err != nil {
		t.Fatalf("reading the bundled SAM schema: %v", err)
	}
	root, _ := doc.(map[string]any)
	defs, _ := root["definitions"].(map[string]any)
	if len(defs) == 0 {
		t.Fatal("the bundled SAM schema has no definitions")
	}
	return &samSchema{root: root, defs: defs}
}

// schemaError is one failed check: where in the template, and which
// keyword failed there.
type schemaError struct {
	at      string // "Resources/CompactFunction/Properties/Timeout"
	kind    jsonschema.ErrorKind
	message string
}

func (e schemaError) String() string { return e.at + ": " + e.message }

// validate returns every leaf failure of the template, each located from
// the template's root. None means the template matches the schema.
func (s *samSchema) validate(template map[string]any) ([]schemaError, error) {
	resources, _ := template["Resources"].(map[string]any)
	var errs []schemaError
	types := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		res, _ := resources[name].(map[string]any)
		typ, _ := res["Type"].(string)
		if _, ok := s.defs[typ]; !ok || !strings.Contains(typ, "::") {
			errs = append(errs, schemaError{at: "Resources/" + name + "/Type", message: fmt.Sprintf("resource type %q is not in the SAM schema", typ)})
			continue
		}
		types[typ] = true
	}
	root, byType, err := s.compile(slices.Sorted(maps.Keys(types)))
	if err != nil {
		return nil, err
	}
	top := maps.Clone(template)
	if resources != nil {
		top["Resources"] = map[string]any{} // checked one by one below
	}
	errs = append(errs, leaves(root.Validate(top), nil)...)
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		res, ok := resources[name].(map[string]any)
		if !ok {
			continue // the root's check reports a resource that is no object
		}
		typ, _ := res["Type"].(string)
		if sch, ok := byType[typ]; ok {
			errs = append(errs, leaves(sch.Validate(res), []string{"Resources", name})...)
		}
	}
	return errs, nil
}

// compile compiles the schema's root, with each resource checked only to
// be an object, and the definitions of types.
func (s *samSchema) compile(types []string) (*jsonschema.Schema, map[string]*jsonschema.Schema, error) {
	doc := maps.Clone(s.root)
	delete(doc, "definitions")
	props := maps.Clone(doc["properties"].(map[string]any))
	resources := maps.Clone(props["Resources"].(map[string]any))
	patterns := maps.Clone(resources["patternProperties"].(map[string]any))
	for p := range patterns {
		patterns[p] = map[string]any{"type": "object"}
	}
	resources["patternProperties"] = patterns
	props["Resources"] = resources
	doc["properties"] = props

	needed := map[string]any{}
	pending := slices.Clone(types)
	pending = append(pending, definitionRefs(doc)...)
	for len(pending) > 0 {
		name := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if _, done := needed[name]; done {
			continue
		}
		def, ok := s.defs[name]
		if !ok {
			return nil, nil, fmt.Errorf("the SAM schema refers to a missing definition %q", name)
		}
		needed[name] = def
		pending = append(pending, definitionRefs(def)...)
	}
	doc["definitions"] = needed

	c := jsonschema.NewCompiler()
	// The schema is draft-04 but declares no $schema (its "$id" holds the
	// draft-04 meta-schema's address, a keyword draft-04 ignores).
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource(samSchemaURL, doc); err != nil {
		return nil, nil, err
	}
	root, err := c.Compile(samSchemaURL)
	if err != nil {
		return nil, nil, fmt.Errorf("compiling the SAM schema: %w", err)
	}
	byType := map[string]*jsonschema.Schema{}
	for _, typ := range types {
		// A JSON pointer escapes "~" and "/"; resource type names have neither.
		if byType[typ], err = c.Compile(samSchemaURL + "#/definitions/" + typ); err != nil {
			return nil, nil, fmt.Errorf("compiling the schema of %s: %w", typ, err)
		}
	}
	return root, byType, nil
}

// definitionRefs lists the definitions a schema fragment refers to.
func definitionRefs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if name, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
				out = append(out, strings.NewReplacer("~1", "/", "~0", "~").Replace(name))
			}
		}
		for _, e := range x {
			out = append(out, definitionRefs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, definitionRefs(e)...)
		}
	}
	return out
}

var english = message.NewPrinter(language.English)

// leaves flattens a validation error to the failures that caused it,
// prefixing each instance location with at.
func leaves(err error, at []string) []schemaError {
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []schemaError{{at: strings.Join(at, "/"), message: err.Error()}}
	}
	var out []schemaError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := append(slices.Clone(at), e.InstanceLocation...)
			out = append(out, schemaError{at: strings.Join(loc, "/"), kind: e.ErrorKind, message: e.ErrorKind.LocalizedString(english)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

func TestTemplateValidatesAgainstTheSAMSchema(t *testing.T) {
	sam := loadSAMSchema(t)
	for _, tc := range []struct {
		name   string
		params map[string]any
	}{{"defaults", defaults}, {"all options", allOptions}} {
		t.Run(tc.name, func(t *testing.T) {
			s := load(t, tc.params)
			if resources, _ := s.raw["Resources"].(map[string]any); len(resources) == 0 {
				t.Fatal("the template has no resources")
			}
			errs, err := sam.validate(s.schemaDoc())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}

// The schema check sees each Fn::If resolved one way per parameter set, so
// the sets must take every condition both ways between them, or a branch
// would go unchecked.
func TestParameterSetsTakeEveryConditionBothWays(t *testing.T) {
	seen := map[string]map[bool]bool{}
	for _, params := range []map[string]any{defaults, allOptions, compactorByARN, alarmEmail, tokensInSSM} {
		for name, v := range conditionValues(t, params) {
			if seen[name] == nil {
				seen[name] = map[bool]bool{}
			}
			seen[name][v] = true
		}
	}
	if len(seen) == 0 {
		t.Fatal("the template has no conditions")
	}
	for name, values := range seen {
		if !values[true] || !values[false] {
			t.Errorf("condition %s is %v under every parameter set the tests use", name, sortedBools(values))
		}
	}
}

// conditionValues is the value of every condition of the template with
// params (resolution evaluates the Conditions section).
func conditionValues(t *testing.T, params map[string]any) map[string]bool {
	t.Helper()
	conds, _ := load(t, params).raw["Conditions"].(map[string]any)
	values := map[string]bool{}
	for name, c := range conds {
		b, ok := c.(bool)
		if !ok {
			t.Fatalf("condition %s does not evaluate to a boolean: %v", name, c)
		}
		values[name] = b
	}
	return values
}

func sortedBools(m map[bool]bool) []bool {
	var out []bool
	for _, b := range []bool{false, true} {
		if m[b] {
			out = append(out, b)
		}
	}
	return out
}

// copyJSON deep-copies a decoded JSON document so a case can change it.
func copyJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// at returns the object at path in doc, failing the test when it is not one.
func at(t *testing.T, doc map[string]any, path ...string) map[string]any {
	t.Helper()
	cur := doc
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("the template has no object at %s", strings.Join(path, "/"))
		}
		cur = next
	}
	return cur
}

// The schema check is only worth having if it rejects what a deployment
// would: each case breaks the real template in one way and names the
// failure the schema must report.
func TestSAMSchemaRejectsABrokenTemplate(t *testing.T) {
	sam := loadSAMSchema(t)
	valid := load(t, defaults).schemaDoc()
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, doc map[string]any)
		where  string
		kind   jsonschema.ErrorKind
	}{
		{
			name: "unknown function property",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "CompactFunction", "Properties")["Timeuot"] = 900
			},
			where: "Resources/CompactFunction/Properties",
			kind:  &kind.AdditionalProperties{},
		},
		{
			name: "function timeout as text",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "CompactFunction", "Properties")["Timeout"] = "900s"
			},
			where: "Resources/CompactFunction/Properties/Timeout",
			kind:  &kind.Type{},
		},
		{
			name: "null handler",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "OffloadFunction", "Properties")["Handler"] = nil
			},
			where: "Resources/OffloadFunction/Properties/Handler",
			kind:  &kind.Type{},
		},
		{
			name: "architectures as one string",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "RestoreFunction", "Properties")["Architectures"] = "arm64"
			},
			where: "Resources/RestoreFunction/Properties/Architectures",
			kind:  &kind.Type{},
		},
		{
			name: "environment variables as a list",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "MemoryFunction", "Properties", "Environment")["Variables"] = []any{"A=1"}
			},
			where: "Resources/MemoryFunction/Properties/Environment/Variables",
			kind:  &kind.Type{},
		},
		{
			name: "table without its key schema",
			mutate: func(t *testing.T, d map[string]any) {
				delete(at(t, d, "Resources", "Table", "Properties"), "KeySchema")
			},
			where: "Resources/Table/Properties",
			kind:  &kind.Required{},
		},
		{
			name: "misspelt TTL block on the table",
			mutate: func(t *testing.T, d map[string]any) {
				p := at(t, d, "Resources", "Table", "Properties")
				p["TTL"] = p["TimeToLiveSpecification"]
			},
			where: "Resources/Table/Properties",
			kind:  &kind.AdditionalProperties{},
		},
		{
			name:   "unknown resource attribute",
			mutate: func(t *testing.T, d map[string]any) { at(t, d, "Resources", "Bucket")["DeletePolicy"] = "Retain" },
			where:  "Resources/Bucket",
			kind:   &kind.AdditionalProperties{},
		},
		{
			name:   "deletion policy outside its values",
			mutate: func(t *testing.T, d map[string]any) { at(t, d, "Resources", "Table")["DeletionPolicy"] = "Keep" },
			where:  "Resources/Table/DeletionPolicy",
			kind:   &kind.Enum{},
		},
		{
			name: "resource type that does not exist",
			mutate: func(t *testing.T, d map[string]any) {
				at(t, d, "Resources", "BuildQueue")["Type"] = "AWS::SQS::Queueue"
			},
			where: "Resources/BuildQueue/Type",
		},
		{
			name:   "unknown top-level section",
			mutate: func(t *testing.T, d map[string]any) { d["Output"] = d["Outputs"] },
			where:  "",
			kind:   &kind.AdditionalProperties{},
		},
		{
			name:   "template without the SAM transform",
			mutate: func(t *testing.T, d map[string]any) { delete(d, "Transform") },
			where:  "",
			kind:   &kind.Required{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := copyJSON(t, valid)
			tc.mutate(t, doc)
			errs, err := sam.validate(doc)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) == 0 {
				t.Fatal("the broken template validates")
			}
			for _, e := range errs {
				if e.at == tc.where && (tc.kind == nil || reflect.TypeOf(e.kind) == reflect.TypeOf(tc.kind)) {
					return
				}
			}
			t.Errorf("no %T at %q; got:\n%s", tc.kind, tc.where, joinErrors(errs))
		})
	}
}

func joinErrors(errs []schemaError) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.String()
	}
	return strings.Join(lines, "\n")
}
