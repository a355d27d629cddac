package rawjson

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// splitCases are valid documents of every shape the splitter meets.
var splitCases = []string{
	`{}`, `[]`, ` { } `, `[ ]`, `null`, `"s"`, `12`, `true`,
	`{"a":1,"b":"x","c":null,"d":true,"e":false,"f":-1.5e3}`,
	` { "a" : [ 1 , { "b" : "}" } ] , "c" : "\"]" } `,
	`{"k\"ey":"v\\","k\u00e9":"\\\"","a":1,"a":2}`,
	"{\"\xff\":1,\"é\":[\"x\",{}]}",
	`[{"type":"image","data":"QUJD\\/"},"x",[[]],null,0]`,
	"[1,\n2\t,\r\n{\"a\":\"b\"} ]",
}

// TestFieldsSplitAsEncodingJSONDoes: each field and item is what
// json.Unmarshal into a map[string]Value or []Value gives, key for key.
func TestFieldsSplitAsEncodingJSONDoes(t *testing.T) {
	for _, doc := range splitCases {
		checkSplit(t, []byte(doc))
	}
}

func checkSplit(t *testing.T, doc []byte) {
	t.Helper()
	var wantMap map[string]Value
	mapErr := json.Unmarshal(doc, &wantMap)
	gotMap, ok := FieldMap(doc)
	if ok != (mapErr == nil && wantMap != nil) {
		t.Fatalf("%q: FieldMap ok %v, json.Unmarshal err %v, map %v", doc, ok, mapErr, wantMap)
	}
	if ok && !maps.EqualFunc(gotMap, wantMap, func(a, b Value) bool { return string(a) == string(b) }) {
		t.Errorf("%q: FieldMap %q, json.Unmarshal %q", doc, gotMap, wantMap)
	}
	var wantList []Value
	listErr := json.Unmarshal(doc, &wantList)
	gotList, ok := ItemList(doc)
	if ok != (listErr == nil && wantList != nil) {
		t.Fatalf("%q: ItemList ok %v, json.Unmarshal err %v", doc, ok, listErr)
	}
	if ok && !slices.EqualFunc(gotList, wantList, func(a, b Value) bool { return string(a) == string(b) }) {
		t.Errorf("%q: ItemList %q, json.Unmarshal %q", doc, gotList, wantList)
	}
}

func FuzzFieldsSplitAsEncodingJSONDoes(f *testing.F) {
	for _, doc := range splitCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		checkSplit(t, doc)
	})
}
