package lifecycle_test

import (
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/lifecycle"
)

func TestAnExportsAfterIsReadAsItsPartHandsItOut(t *testing.T) {
	for _, tt := range []struct {
		after string
		want  lifecycle.ExportFrom
		ok    bool
	}{
		{"", lifecycle.ExportFrom{After: -1}, true},
		{"0", lifecycle.ExportFrom{After: 0}, true},
		{"0.2", lifecycle.ExportFrom{After: 0, Carried: 2}, true},
		{"-1.2", lifecycle.ExportFrom{After: -1, Carried: 2}, true}, // within the first message's images
		{"-1", lifecycle.ExportFrom{After: -1}, true},
		{"11.1001", lifecycle.ExportFrom{After: 11, Carried: 1001}, true},
		{"-2.1", lifecycle.ExportFrom{}, false},
		{"1.-1", lifecycle.ExportFrom{}, false},
		{"1.", lifecycle.ExportFrom{}, false},
		{".2", lifecycle.ExportFrom{}, false},
		{"x", lifecycle.ExportFrom{}, false},
		{"9007199254740992", lifecycle.ExportFrom{}, false},
	} {
		got, err := lifecycle.ParseExportFrom(tt.after)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseExportFrom(%q) = %+v, %v; want %+v, ok %v", tt.after, got, err, tt.want, tt.ok)
		}
		if err != nil && api.AsError(err).Field != "after" {
			t.Errorf("ParseExportFrom(%q): %v does not name after", tt.after, err)
		}
	}
}

// FuzzEveryExportCursorIsTakenBack: a part hands out the from of the next
// (ExportFrom.String) with After one less than the seq of a message (0 to
// api.MaxSeq) and Carried the images of it already carried; every such
// after reads back as that from. And an after that reads at all reads as
// the from it writes again.
func FuzzEveryExportCursorIsTakenBack(f *testing.F) {
	f.Add(int64(0), 2, "-1.2")
	f.Add(int64(1), 4, "0.4")
	f.Add(int64(12), 0, "11")
	f.Add(int64(api.MaxSeq), 1000, "+3.07")
	f.Fuzz(func(t *testing.T, seq int64, carried int, after string) {
		if seq >= 0 && seq <= api.MaxSeq && carried >= 0 {
			from := lifecycle.ExportFrom{After: seq - 1, Carried: carried}
			got, err := lifecycle.ParseExportFrom(from.String())
			if err != nil || got != from {
				t.Fatalf("%+v is handed out as %q, read back as %+v, %v", from, from.String(), got, err)
			}
		}
		if from, err := lifecycle.ParseExportFrom(after); err == nil {
			if again, err := lifecycle.ParseExportFrom(from.String()); err != nil || again != from {
				t.Fatalf("%q reads as %+v, written as %q, read back as %+v, %v", after, from, from.String(), again, err)
			}
		}
	})
}
