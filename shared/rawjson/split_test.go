package rawjson

import (
	"encoding/json"
	"fmt"
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

// TestItemListOfEveryLengthIsTheList: lists collected in one pass and lists
// long enough to be counted first are the same items.
func TestItemListOfEveryLengthIsTheList(t *testing.T) {
	for _, n := range []int{0, 1, grownItems - 1, grownItems, grownItems + 1, 3 * grownItems} {
		var doc []byte
		doc = append(doc, '[')
		for i := range n {
			if i > 0 {
				doc = append(doc, ',')
			}
			doc = append(doc, fmt.Sprintf(`{"i":%d,"s":"a\"b"}`, i)...)
		}
		doc = append(doc, ']')
		items, ok := ItemList(doc)
		if !ok || items == nil || len(items) != n {
			t.Fatalf("%d items: ItemList gave %d (ok %v, nil %v)", n, len(items), ok, items == nil)
		}
		for i, it := range items {
			if want := fmt.Sprintf(`{"i":%d,"s":"a\"b"}`, i); string(it) != want || cap(it) != len(it) {
				t.Fatalf("%d items: item %d is %s (cap %d), want %s", n, i, it, cap(it), want)
			}
		}
	}
}
