package memory

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestTheOpenAPIDocumentsToolsAreMadeFromTheToolTable: the memory tools'
// part of shared/api/openapi.json is what OpenAPITools makes of the tool
// table (go generate ./shared/memory writes it).
func TestTheOpenAPIDocumentsToolsAreMadeFromTheToolTable(t *testing.T) {
	doc, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	made, err := OpenAPITools(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(made, doc) {
		t.Error("shared/api/openapi.json is stale: run go generate ./shared/memory and commit it")
	}
}

// TestOpenAPIToolsFollowsTheTable: a tool added to the table gets a path
// (the responses of the first tool's), a tool removed loses its own, and
// the tool list names the table's tools.
func TestOpenAPIToolsFollowsTheTable(t *testing.T) {
	doc, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	saved := toolTable
	t.Cleanup(func() { toolTable = saved })
	recall := Tool[struct {
		Topic string `json:"topic"`
	}]{Name: "recall", Summary: "Recall a topic."}.spec()
	toolTable = append([]ToolSpec{recall}, saved[1:]...) // zoom out, recall in
	made, err := OpenAPITools(doc)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, made); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want bool
	}{
		{`"/v1/chats/{chat}/tools/recall":{`, true},
		{`"operationId":"recall","summary":"Recall a topic."`, true},
		{`"properties":{"topic":{"type":"string"}}`, true},
		{`"/v1/chats/{chat}/tools/zoom"`, false},
		{`"enum":["recall","date","search","forget"]`, true},
	} {
		if got := bytes.Contains(compact.Bytes(), []byte(c.text)); got != c.want {
			t.Errorf("%s: in the document %v, want %v", c.text, got, c.want)
		}
	}
}
