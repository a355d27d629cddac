package importfile_test

import (
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
)

func TestParseKeepsMessagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    []string
		skipped int
		err     bool
	}{
		{name: "export", file: `{"seq":0,"message":{"role":"user","content":"a"}}` + "\n\n" + `{"seq":1,"message":{"role":"user","content":"b"}}`,
			want: []string{`{"role":"user","content":"a"}`, `{"role":"user","content":"b"}`}},
		{name: "an export's images keep their place", file: `{"image":{"name":"0123456789abcdef","mimeType":"image/png","data":"AA=="}}` + "\n" + `{"seq":0,"message":{"role":"user","content":[{"type":"text","text":"[image 0123456789abcdef]"}]}}`,
			want: []string{`image {"name":"0123456789abcdef","mimeType":"image/png","data":"AA=="}`, `{"role":"user","content":[{"type":"text","text":"[image 0123456789abcdef]"}]}`}},
		{name: "linear session", file: `{"type":"session","version":1}` + "\n" + `{"type":"message","message":{"role":"user","content":"a"}}` + "\n" + `{"type":"thinking_level_change","level":"high"}`,
			want: []string{`{"role":"user","content":"a"}`}, skipped: 1},
		{name: "tree takes the last branch", file: `{"type":"session","id":"s"}
{"type":"message","id":"1","parentId":null,"message":{"role":"user","content":"root"}}
{"type":"message","id":"2","parentId":"1","message":{"role":"user","content":"left"}}
{"type":"message","id":"3","parentId":"1","message":{"role":"user","content":"right"}}`,
			want: []string{`{"role":"user","content":"root"}`, `{"role":"user","content":"right"}`}, skipped: 1},
		{name: "a missing parent is refused", file: `{"type":"message","id":"1","parentId":null,"message":{}}
{"type":"message","id":"2","parentId":"9","message":{}}`, err: true},
		{name: "not JSON is refused", file: "nope", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped, err := importfile.Parse(strings.NewReader(tc.file))
			if tc.err {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, it := range got {
				if it.Image != nil {
					s = append(s, "image "+string(it.Image))
					continue
				}
				s = append(s, string(it.Message))
			}
			if strings.Join(s, "\n") != strings.Join(tc.want, "\n") || skipped != tc.skipped {
				t.Fatalf("Parse = %v, %d skipped; want %v, %d", s, skipped, tc.want, tc.skipped)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"type":"message","id":"1","parentId":null,"message":{"role":"user"}}`)
	f.Add(`{"seq":0,"message":{}}`)
	f.Fuzz(func(t *testing.T, file string) {
		msgs, skipped, err := importfile.Parse(strings.NewReader(file))
		if err == nil && (skipped < 0 || len(msgs) > strings.Count(file, "\n")+1) {
			t.Fatalf("%d messages, %d skipped from %d lines", len(msgs), skipped, strings.Count(file, "\n")+1)
		}
	})
}

// TestRenameRefsFollowsEachRenamedImage: every ref to a renamed image, in
// a ref block or in prose, names the new name; other refs are left alone.
func TestRenameRefsFollowsEachRenamedImage(t *testing.T) {
	msg := `{"role":"user","content":[{"type":"text","text":"[image 00000000000000aa]"},{"type":"text","text":"see [image 00000000000000aa] and [image 00000000000000bb]"}]}`
	got, changed := importfile.RenameRefs([]byte(msg), map[string]string{"00000000000000aa": "00000000000000cc"})
	want := strings.ReplaceAll(msg, "00000000000000aa", "00000000000000cc")
	if !changed || string(got) != want {
		t.Fatalf("RenameRefs = %s, %v; want %s", got, changed, want)
	}
	if _, changed := importfile.RenameRefs([]byte(msg), map[string]string{"00000000000000dd": "00000000000000cc"}); changed {
		t.Fatal("a message naming no renamed image changed")
	}
}
