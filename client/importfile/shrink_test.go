package importfile_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
)

// TestShrinkReplacesEachImageByItsRefInTheHostsOwnFormat: a pi session, a
// Codex CLI rollout and a Claude Code session (the formats of
// TestCodexRolloutReadsEachItemKind and TestClaudeCodeSessionReadsEachLineKind),
// shrunk, keep every line, read as the same format into the same
// messages with each image a text block of its ref, and are a fraction of
// the size.
func TestShrinkReplacesEachImageByItsRefInTheHostsOwnFormat(t *testing.T) {
	img := strings.Repeat("iVBORw0KGgo", 10000) // 110 KB of base64
	name := importfile.ImageName(img)
	for _, tc := range []struct {
		name, file string
		images     int
	}{
		{"pi", `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}
{"type":"message","id":"1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"this"},{"type":"image","data":"` + img + `","mimeType":"image/png"}],"timestamp":1}}
{"type":"model_change","id":"2","parentId":"1","timestamp":"2026-01-01T00:00:02.000Z","provider":"p","modelId":"m"}
{"type":"message","id":"3","parentId":"2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c","toolName":"shot","content":[{"type":"image","data":"` + img + `","mimeType":"image/png"}],"isError":false,"timestamp":2}}`, 2},
		{"codex", codexMeta + codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"this"},{"type":"input_image","image_url":"data:image/png;base64,`+img+`"}]}`) +
			codexLine("event_msg", `{"type":"user_message","message":"this","images":["data:image/png;base64,`+img+`"]}`) +
			codexLine("response_item", `{"type":"function_call","name":"shot","arguments":"{}","call_id":"c"}`) +
			codexLine("response_item", `{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,`+img+`"}]}`) +
			codexLine("response_item", `{"type":"function_call_output","call_id":"d","output":"done"}`), 3},
		{"claude", claudeLine("user", "u1", "", `{"role":"user","content":[{"type":"text","text":"this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+img+`"}}]}`, "") +
			claudeLine("assistant", "a1", "u1", `{"id":"m","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"/w/a.png"}}]}`, "") +
			claudeLine("user", "u2", "a1", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+img+`"}}]}]}`,
				`,"toolUseResult":{"type":"image","file":{"base64":"`+img+`","type":"image/png","originalSize":82500}}`), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			n, err := importfile.Shrink(strings.NewReader(tc.file), &out)
			if err != nil {
				t.Fatal(err)
			}
			lines := func(s string) int { return strings.Count(strings.TrimSpace(s), "\n") + 1 }
			if n != tc.images || lines(out.String()) != lines(tc.file) {
				t.Fatalf("replaced %d images in %d lines, want %d in %d", n, lines(out.String()), tc.images, lines(tc.file))
			}
			if out.Len()*20 > len(tc.file) || strings.Contains(out.String(), img[:100]) {
				t.Fatalf("shrunk to %d bytes of %d, image data left: %v", out.Len(), len(tc.file), strings.Contains(out.String(), img[:100]))
			}
			was, wasSkipped, err := importfile.Parse(strings.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			now, nowSkipped, err := importfile.Parse(&out)
			if err != nil {
				t.Fatalf("the shrunk file does not read: %v", err)
			}
			if len(now) != len(was) || nowSkipped.Total() != wasSkipped.Total() {
				t.Fatalf("the shrunk file reads as %d messages and %v skipped, the file as %d and %v", len(now), nowSkipped, len(was), wasSkipped)
			}
			for i := range now {
				want := strings.ReplaceAll(string(was[i].Message), `{"type":"image","data":"`+img+`","mimeType":"image/png"}`, `{"type":"text","text":"[image `+name+`]"}`)
				if sorted(t, now[i].Message) != sorted(t, []byte(want)) {
					t.Fatalf("message %d of the shrunk file:\n%s\nwant\n%s", i, now[i].Message, want)
				}
			}
		})
	}
}

// sorted is a JSON value with its keys sorted.
func sorted(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
