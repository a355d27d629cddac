package importfile_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
)

func TestParseKeepsMessagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    []string
		skipped importfile.Skipped
		err     bool
	}{
		{name: "export", file: `{"seq":0,"message":{"role":"user","content":"a"}}` + "\n\n" + `{"seq":1,"message":{"role":"user","content":"b"}}`,
			want: []string{`{"role":"user","content":"a"}`, `{"role":"user","content":"b"}`}},
		{name: "an export's images keep their place", file: `{"image":{"name":"0123456789abcdef","mimeType":"image/png","data":"AA=="}}` + "\n" + `{"seq":0,"message":{"role":"user","content":[{"type":"text","text":"[image 0123456789abcdef]"}]}}`,
			want: []string{`image {"name":"0123456789abcdef","mimeType":"image/png","data":"AA=="}`, `{"role":"user","content":[{"type":"text","text":"[image 0123456789abcdef]"}]}`}},
		{name: "linear session", file: `{"type":"session","version":1}` + "\n" + `{"type":"message","message":{"role":"user","content":"a"}}` + "\n" + `{"type":"thinking_level_change","level":"high"}`,
			want: []string{`{"role":"user","content":"a"}`}, skipped: importfile.Skipped{"thinking_level_change": 1}},
		{name: "tree takes the last branch", file: `{"type":"session","id":"s"}
{"type":"message","id":"1","parentId":null,"message":{"role":"user","content":"root"}}
{"type":"message","id":"2","parentId":"1","message":{"role":"user","content":"left"}}
{"type":"message","id":"3","parentId":"1","message":{"role":"user","content":"right"}}`,
			want: []string{`{"role":"user","content":"root"}`, `{"role":"user","content":"right"}`}, skipped: importfile.Skipped{"off-branch": 1}},
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
			if strings.Join(s, "\n") != strings.Join(tc.want, "\n") || !maps.Equal(skipped, tc.skipped) && skipped.Total()+tc.skipped.Total() > 0 {
				t.Fatalf("Parse = %v, %v skipped; want %v, %v", s, skipped, tc.want, tc.skipped)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"type":"message","id":"1","parentId":null,"message":{"role":"user"}}`)
	f.Add(`{"seq":0,"message":{}}`)
	f.Fuzz(func(t *testing.T, file string) {
		msgs, skipped, err := importfile.Parse(strings.NewReader(file))
		if err == nil && (skipped.Total() < 0 || len(msgs) > strings.Count(file, "\n")+1) {
			t.Fatalf("%d messages, %v skipped from %d lines", len(msgs), skipped, strings.Count(file, "\n")+1)
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

// piSession is a pi 1.x session file of every entry type pi 1.6 writes
// (the SessionEntry union of @earendil-works/pi-coding-agent 1.6.0,
// dist/core/session-manager.d.ts, and its message roles, messages.d.ts
// and pi-ai's SystemMessage), as a tree: the session went back from
// entry 9 to entry 4, summarising the branch it left, and ended on 12.
const piSession = `{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T10:00:00.000Z","cwd":"/home/u/p"}
{"type":"message","id":"1","parentId":null,"timestamp":"2026-12-01T10:00:00.001Z","message":{"role":"system","content":"You are pi.","toolsAdded":[{"name":"bash","description":"run","parameters":{}}],"timestamp":1}}
{"type":"model_change","id":"2","parentId":"1","timestamp":"2026-12-01T10:00:00.002Z","provider":"faux","modelId":"faux-1"}
{"type":"thinking_level_change","id":"3","parentId":"2","timestamp":"2026-12-01T10:00:00.003Z","thinkingLevel":"high"}
{"type":"message","id":"4","parentId":"3","timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"bashExecution","command":"ls","output":"a.go","exitCode":0,"cancelled":false,"truncated":false,"timestamp":2}}
{"type":"message","id":"5","parentId":"4","timestamp":"2026-12-01T10:00:02.000Z","message":{"role":"user","content":"take a screenshot","timestamp":3}}
{"type":"message","id":"6","parentId":"5","timestamp":"2026-12-01T10:00:03.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"screenshot","arguments":{}}],"stopReason":"toolUse","timestamp":4}}
{"type":"message","id":"7","parentId":"6","timestamp":"2026-12-01T10:00:04.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"screenshot","content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":false,"timestamp":5}}
{"type":"custom","id":"8","parentId":"7","timestamp":"2026-12-01T10:00:05.000Z","customType":"durachat","data":{"chat":"pi-s1","id":"7"}}
{"type":"message","id":"9","parentId":"8","timestamp":"2026-12-01T10:00:06.000Z","message":{"role":"user","content":"left branch","timestamp":6}}
{"type":"branch_summary","id":"10","parentId":"8","timestamp":"2026-12-01T10:00:07.000Z","fromId":"9","summary":"asked for the left"}
{"type":"custom_message","id":"11","parentId":"10","timestamp":"2026-12-01T10:00:08.000Z","customType":"note","content":"a note","display":true}
{"type":"compaction","id":"12","parentId":"11","timestamp":"2026-12-01T10:00:09.000Z","summary":"a screenshot was taken","firstKeptEntryId":"5","tokensBefore":900}
{"type":"label","id":"13","parentId":"12","timestamp":"2026-12-01T10:00:10.000Z","targetId":"6","label":"shot"}
{"type":"session_info","id":"14","parentId":"13","timestamp":"2026-12-01T10:00:11.000Z","name":"screens"}
{"type":"message","id":"15","parentId":"14","timestamp":"2026-12-01T10:00:12.000Z","message":{"role":"custom","customType":"note","content":"x","display":false,"timestamp":7}}
{"type":"message","id":"16","parentId":"15","timestamp":"2026-12-01T10:00:13.000Z","message":{"role":"compactionSummary","summary":"s","tokensBefore":1,"timestamp":8}}
{"type":"message","id":"17","parentId":"16","timestamp":"2026-12-01T10:00:14.000Z","message":{"role":"branchSummary","summary":"s","fromId":"9","timestamp":9}}
{"type":"message","id":"18","parentId":"17","timestamp":"2026-12-01T10:00:15.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","timestamp":10}}`

// TestParseReadsEveryEntryTypeOfAPi1Session: a pi 1.x session imports
// the user, assistant and tool-result messages of its branch, in order;
// every other entry (the system message first of all, a bash execution,
// custom entries and messages, summaries, model and thinking-level
// changes, labels, and the entries of the branch left) is skipped and
// counted by kind.
func TestParseReadsEveryEntryTypeOfAPi1Session(t *testing.T) {
	items, skipped, err := importfile.Parse(strings.NewReader(piSession))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, it := range items {
		lines = append(lines, it.Line)
	}
	if want := []int{6, 7, 8, 19}; !slices.Equal(lines, want) {
		t.Fatalf("imported lines %v, want %v", lines, want)
	}
	want := importfile.Skipped{"message/system": 1, "model_change": 1, "thinking_level_change": 1, "message/bashExecution": 1,
		"custom": 1, "off-branch": 1, "branch_summary": 1, "custom_message": 1, "compaction": 1, "label": 1, "session_info": 1,
		"message/custom": 1, "message/compactionSummary": 1, "message/branchSummary": 1}
	if !maps.Equal(skipped, want) {
		t.Fatalf("skipped %v, want %v", skipped, want)
	}
	if n := strings.Count(piSession, "\n") + 1; len(items)+skipped.Total() != n-1 {
		t.Fatalf("%d imported and %d skipped of %d entries", len(items), skipped.Total(), n-1)
	}
}

// TestParseNamesAFileOfAnotherFormat: a file no format durachat reads
// (lines of no known type) is an error naming what it is and its first
// line, never a file of nothing.
func TestParseNamesAFileOfAnotherFormat(t *testing.T) {
	for _, tc := range []struct {
		name, file, found string
		line              int
	}{
		{"lines of no known type", `{"kind":"chat","text":"hi"}
{"type":"turn","text":"hello"}`, `"untyped", "turn"`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, skipped, err := importfile.Parse(strings.NewReader(tc.file))
			var fe *importfile.FormatError
			if !errors.As(err, &fe) || fe.Line != tc.line || !strings.Contains(fe.Error(), tc.found) {
				t.Fatalf("Parse = %d items, %v skipped, %v; want a FormatError at line %d naming %s", len(items), skipped, err, tc.line, tc.found)
			}
		})
	}
}

// TestAMessagesPlaceIsItsFileAndLine: the same message on two lines of a
// file has two places, the same each time the file is read; files of
// other first lines are other files; a line sent in a part of its file
// keeps the place it names ("at").
func TestAMessagesPlaceIsItsFileAndLine(t *testing.T) {
	msg := `{"type":"message","message":{"role":"user","content":"again"}}`
	places := func(file string) []importfile.Place {
		t.Helper()
		items, _, err := importfile.Parse(strings.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		var out []importfile.Place
		for _, it := range items {
			out = append(out, it.Place)
		}
		return out
	}
	file := `{"type":"session","version":1,"id":"a"}` + "\n" + msg + "\n" + msg + "\n"
	got := places(file)
	if len(got) != 2 || got[0].File == "" || got[0].File != got[1].File || got[0].Line != 2 || got[1].Line != 3 {
		t.Fatalf("places = %+v, want lines 2 and 3 of one file", got)
	}
	if again := places(file); !slices.Equal(again, got) {
		t.Errorf("read again: %+v, want %+v", again, got)
	}
	if other := places(`{"type":"session","version":1,"id":"b"}` + "\n" + msg + "\n"); other[0].File == got[0].File {
		t.Errorf("a file of another first line has the same name %q", other[0].File)
	}
	sent := `{"type":"message","message":{"role":"user","content":"again"},"at":{"file":"f","line":40}}`
	if p := places(sent); len(p) != 1 || p[0] != (importfile.Place{File: "f", Line: 40}) {
		t.Errorf("a sent line's place = %+v, want the one it names", p)
	}
}
