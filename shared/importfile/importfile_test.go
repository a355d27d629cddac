package importfile_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/importfile"
)

func TestParseKeepsMessagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    []string
		skipped int
		err     bool
		lines   bool // want each item as "line what"
	}{
		{name: "export", file: `{"seq":0,"message":{"role":"user","content":"a"}}` + "\n\n" + `{"seq":1,"message":{"role":"user","content":"b"}}`,
			want: []string{`{"role":"user","content":"a"}`, `{"role":"user","content":"b"}`}},
		{name: "linear session", file: `{"type":"session","version":1}` + "\n" + `{"type":"message","message":{"role":"user","content":"a"}}` + "\n" + `{"type":"thinking_level_change","level":"high"}`,
			want: []string{`{"role":"user","content":"a"}`}, skipped: 1},
		{name: "tree takes the last branch", file: `{"type":"session","id":"s"}
{"type":"message","id":"1","parentId":null,"message":{"role":"user","content":"root"}}
{"type":"message","id":"2","parentId":"1","message":{"role":"user","content":"left"}}
{"type":"message","id":"3","parentId":"1","message":{"role":"user","content":"right"}}`,
			want: []string{`{"role":"user","content":"root"}`, `{"role":"user","content":"right"}`}, skipped: 1},
		{name: "a missing parent is refused", file: `{"type":"message","id":"1","parentId":null,"message":{}}
{"type":"message","id":"2","parentId":"9","message":{}}`, err: true},
		{name: "an export's image lines come in order, lines counted from 1", file: `{"type":"image","name":"0123456789abcdef","mimeType":"image/png","data":"QUJD"}` + "\n\n" +
			`{"seq":0,"message":{"role":"user","content":"[image 0123456789abcdef]"}}`,
			want: []string{`1 image 0123456789abcdef image/png QUJD`, `3 {"role":"user","content":"[image 0123456789abcdef]"}`}, lines: true},
		{name: "a session's custom data is no image", file: `{"type":"custom","data":{"x":1}}`, skipped: 1},
		{name: "an image line of the wrong shape is refused", file: `{"type":"image","name":5}`, err: true},
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
				what := string(it.Message)
				if it.Image != nil {
					what = fmt.Sprintf("image %s %s %s", it.Image.Name, it.Image.MimeType, it.Image.Data)
				}
				if tc.lines {
					what = fmt.Sprintf("%d %s", it.Line, what)
				}
				s = append(s, what)
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
	f.Add(`{"type":"image","name":"0123456789abcdef","data":"QUJD"}`)
	f.Fuzz(func(t *testing.T, file string) {
		items, skipped, err := importfile.Parse(strings.NewReader(file))
		lines := strings.Count(file, "\n") + 1
		if err == nil && (skipped < 0 || len(items) > lines) {
			t.Fatalf("%d items, %d skipped from %d lines", len(items), skipped, lines)
		}
		for _, it := range items {
			if it.Line < 1 || it.Line > lines || (it.Message == nil) == (it.Image == nil) {
				t.Fatalf("item %+v of a file of %d lines", it, lines)
			}
		}
	})
}
