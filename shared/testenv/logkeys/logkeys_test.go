package logkeys

import (
	"strings"
	"testing"
)

func TestARecordWithAKeyTwiceAtAnyDepthIsRefused(t *testing.T) {
	tests := []struct {
		name, record, twice string
	}{
		{"flat", `{"level":"INFO","msg":"x","chat":"c"}`, ""},
		{"top level twice", `{"level":"INFO","msg":"x","level":3}`, `"level"`},
		{"in a group", `{"images":{"named":1,"named":2}}`, `"images.named"`},
		{"same key in two groups", `{"a":{"n":1},"b":{"n":1}}`, ""},
		{"in an array's object", `{"l":[{"k":1},{"k":1,"k":2}]}`, `"l.1.k"`},
		{"escaped the same", `{"a\u0062":1,"ab":2}`, `"ab"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Once([]byte(tt.record))
			switch {
			case tt.twice == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.twice != "" && (err == nil || !strings.Contains(err.Error(), tt.twice)):
				t.Fatalf("got %v, want an error naming %s", err, tt.twice)
			}
		})
	}
}

func TestARecordThatIsNotOneJSONValueIsRefused(t *testing.T) {
	for _, rec := range []string{`{"a":1`, `{"a":1}{"b":2}`, `level=INFO msg=x`, `{"a":}`} {
		if err := Once([]byte(rec)); err == nil {
			t.Errorf("%s: accepted", rec)
		}
	}
}

func FuzzOnce(f *testing.F) {
	f.Add(`{"a":{"b":[1,{"c":2}]},"d":"e"}`)
	f.Add(`{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, s string) {
		_ = Once([]byte(s)) // never panics, never loops
	})
}
