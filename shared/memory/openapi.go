package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/durachat/durachat/shared/rawjson"
)

//go:generate go run ./toolsdoc ../api/openapi.json

// toolsPath is the path of the tool list; a tool's own is toolsPath/name.
const toolsPath = "/v1/chats/{chat}/tools"

// OpenAPITools returns doc, the OpenAPI document (as indented JSON), with
// the memory tools' part made from toolTable: a path for each tool, whose
// operationId, summary and request body are the tool's (its other fields,
// the responses among them, are kept; a new tool's are those of the first
// tool's path), no path for a tool not in the table, and the names the
// tool list answers. The rest of doc is left byte for byte.
func OpenAPITools(doc []byte) ([]byte, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return nil, fmt.Errorf("memory: the OpenAPI document: %w", err)
	}
	var err error
	out := editObject(compact.Bytes(), func(key string, v rawjson.Value) rawjson.Value {
		if key != "paths" {
			return v
		}
		var paths rawjson.Value
		paths, err = toolPaths(v)
		return paths
	}, nil)
	if err != nil {
		return nil, err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out, "", "  "); err != nil {
		return nil, err
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

// toolPaths is the paths object with the tools' paths made from the table.
func toolPaths(paths rawjson.Value) (rawjson.Value, error) {
	var template rawjson.Value
	var names []string
	for _, t := range toolTable {
		names = append(names, t.Name)
	}
	have := map[string]bool{}
	rawjson.Fields(paths, func(key string, v rawjson.Value) {
		if name, ok := strings.CutPrefix(key, toolsPath+"/"); ok && slices.Contains(names, name) {
			have[name] = true
			if template == nil {
				template = v
			}
		}
	})
	if template == nil {
		return nil, fmt.Errorf("memory: the OpenAPI document has no path for any memory tool under %s", toolsPath)
	}
	var err error
	edit := func(key string, v rawjson.Value) rawjson.Value {
		name, ok := strings.CutPrefix(key, toolsPath+"/")
		switch {
		case key == toolsPath:
			return setIn(v, []string{"get", "responses", "200", "content", "application/json", "schema", "properties", "tools", "items", "properties", "name", "enum"}, mustJSON(names))
		case !ok:
			return v
		case !slices.Contains(names, name):
			return nil // a tool no more
		}
		op, oerr := toolOperation(v, name)
		if oerr != nil {
			err = oerr
		}
		return op
	}
	var added []jsonField
	for _, t := range toolTable {
		if !have[t.Name] {
			op, oerr := toolOperation(template, t.Name)
			if oerr != nil {
				return nil, oerr
			}
			added = append(added, jsonField{toolsPath + "/" + t.Name, op})
		}
	}
	out := editObject(paths, edit, added)
	return out, err
}

// toolOperation is the path item v of the tool name with the tool's
// operationId, summary and request body.
func toolOperation(v rawjson.Value, name string) (rawjson.Value, error) {
	i := slices.IndexFunc(toolTable, func(t ToolSpec) bool { return t.Name == name })
	t := toolTable[i]
	type property map[string]any
	props := map[string]property{}
	for name, p := range t.Parameters.Properties {
		switch p.Type {
		case "integer":
			props[name] = property{"$ref": "#/components/schemas/IntArg"}
		case "string":
			props[name] = property{"type": "string"}
		case "array":
			if p.Items == nil || p.Items.Type != "integer" {
				return nil, fmt.Errorf("memory: the %s tool's argument %s is a list of what the OpenAPI document does not describe", t.Name, name)
			}
			props[name] = property{"type": "array", "items": map[string]string{"type": "integer"}}
		default:
			return nil, fmt.Errorf("memory: the %s tool's argument %s is of type %q, which the OpenAPI document does not describe", t.Name, name, p.Type)
		}
	}
	var members []jsonField
	for _, name := range t.Parameters.PropertyOrder {
		members = append(members, jsonField{name, mustJSON(props[name])})
	}
	schema := editObject(mustJSON(map[string]string{"type": "object"}), nil, []jsonField{{"properties", editObject([]byte("{}"), nil, members)}})
	v = setIn(v, []string{"post", "operationId"}, mustJSON(t.Name))
	v = setIn(v, []string{"post", "summary"}, mustJSON(t.Summary))
	return setIn(v, []string{"post", "requestBody", "content", "application/json", "schema"}, schema), nil
}

// jsonField is a field of a JSON object.
type jsonField struct {
	key   string
	value rawjson.Value
}

// editObject is the JSON object raw with each field's value given by edit
// (nil: the field is left out), in raw's order, and added after them.
func editObject(raw rawjson.Value, edit func(key string, v rawjson.Value) rawjson.Value, added []jsonField) rawjson.Value {
	out := []byte{'{'}
	put := func(key string, v rawjson.Value) {
		if v == nil {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(rawjson.AppendKey(out, key), ':')
		out = append(out, v...)
	}
	rawjson.Fields(raw, func(key string, v rawjson.Value) {
		if edit != nil {
			v = edit(key, v)
		}
		put(key, v)
	})
	for _, m := range added {
		put(m.key, m.value)
	}
	return append(out, '}')
}

// setIn is the JSON object raw with the value at path set to v: replaced
// where it stands, or added at the end of its object.
func setIn(raw rawjson.Value, path []string, v rawjson.Value) rawjson.Value {
	found := false
	out := editObject(raw, func(key string, old rawjson.Value) rawjson.Value {
		if key != path[0] {
			return old
		}
		found = true
		if len(path) == 1 {
			return v
		}
		return setIn(old, path[1:], v)
	}, nil)
	if found {
		return out
	}
	if len(path) > 1 {
		v = setIn([]byte("{}"), path[1:], v)
	}
	return editObject(raw, nil, []jsonField{{path[0], v}})
}

// mustJSON is v as JSON, HTML characters left as they are.
func mustJSON(v any) rawjson.Value {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}
