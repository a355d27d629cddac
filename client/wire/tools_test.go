package wire

import (
	"encoding/json"
	"testing"
)

// TestToolArgumentsTellAFieldLeftOutFromOneSetToZero: decoded, a field is
// given when the JSON holds it (null is left out), whatever its value;
// made in Go, when its JSON would hold it.
func TestToolArgumentsTellAFieldLeftOutFromOneSetToZero(t *testing.T) {
	for _, c := range []struct {
		json  string
		given map[string]bool
	}{
		{`{}`, map[string]bool{"id": false, "n": false, "limit": false}},
		{`{"id": 0, "n": 0}`, map[string]bool{"id": true, "n": true, "offset": false}},
		{`{"id": "12", "limit": null}`, map[string]bool{"id": true, "limit": false}},
	} {
		var a ZoomArgs
		if err := json.Unmarshal([]byte(c.json), &a); err != nil {
			t.Fatalf("%s: %v", c.json, err)
		}
		for field, want := range c.given {
			if got := a.Given(field); got != want {
				t.Errorf("%s: %s given %v, want %v", c.json, field, got, want)
			}
		}
	}
	inGo := ZoomArgs{ID: 0, N: 2}
	for field, want := range map[string]bool{"id": true, "n": true, "offset": false} {
		if got := inGo.Given(field); got != want {
			t.Errorf("%+v: %s given %v, want %v", inGo, field, got, want)
		}
	}
}

func FuzzToolNumber(f *testing.F) {
	for _, s := range []string{`5`, `"12"`, `-3`, `1.0`, `1.5`, `"x"`, `null`, `1e3`, `"  7 "`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a DateArgs
		if err := json.Unmarshal([]byte(`{"id": `+s+`}`), &a); err != nil || !a.Given("id") {
			return
		}
		// What was read writes back as a number that reads the same.
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var again DateArgs
		if err := json.Unmarshal(b, &again); err != nil || again.ID != a.ID || !again.Given("id") {
			t.Fatalf("%q read as %d, round trip %q gave %+v (%v)", s, a.ID, b, again, err)
		}
	})
}
