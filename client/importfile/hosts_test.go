package importfile_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
)

// hostCase is a file of another host and the pi messages it imports as.
type hostCase struct {
	name    string
	file    string
	want    []string
	skipped importfile.Skipped
}

func runHostCases(t *testing.T, cases []hostCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, skipped, err := importfile.Parse(strings.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, string(it.Message))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if !maps.Equal(skipped, tc.skipped) && skipped.Total()+tc.skipped.Total() > 0 {
				t.Fatalf("skipped %v, want %v", skipped, tc.skipped)
			}
		})
	}
}

// codexLine is a RolloutLine of a Codex CLI rollout, as codex-rs/protocol
// (protocol.rs: RolloutLine, RolloutItem; models.rs: ResponseItem,
// ContentItem, FunctionCallOutputPayload, LocalShellAction) serializes it.
func codexLine(typ, payload string) string {
	return `{"timestamp":"2026-01-01T00:00:01.000Z","type":"` + typ + `","payload":` + payload + "}\n"
}

const codexMeta = `{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"0199","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.60.0","instructions":null}}` + "\n"

// TestCodexRolloutReadsEachItemKind: each kind of a Codex CLI rollout's
// line is read into pi messages, tool-call ids kept, or skipped and
// counted by kind.
func TestCodexRolloutReadsEachItemKind(t *testing.T) {
	user := codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}`)
	runHostCases(t, []hostCase{
		{name: "user message with an input_image data URL", file: codexMeta + user,
			want:    []string{`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1}},
		{name: "reasoning, text and a function call are one assistant message; its output a toolResult", file: codexMeta +
			codexLine("response_item", `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"plan"}],"content":null,"encrypted_content":"gAAA"}`) +
			codexLine("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"taking one"}]}`) +
			codexLine("response_item", `{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}`) +
			codexLine("response_item", `{"type":"function_call_output","call_id":"call_1","output":"a.go"}`),
			want: []string{`{"role":"assistant","content":[{"type":"thinking","thinking":"plan"},{"type":"text","text":"taking one"},{"type":"toolCall","id":"call_1","name":"shell","arguments":{"command":["ls"]}}],"timestamp":1767225601000}`,
				`{"role":"toolResult","content":[{"type":"text","text":"a.go"}],"toolCallId":"call_1","toolName":"shell","isError":false,"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1}},
		{name: "a function output of content items keeps its image", file: codexMeta +
			codexLine("response_item", `{"type":"function_call","name":"screenshot","arguments":"{}","call_id":"c2"}`) +
			codexLine("response_item", `{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"shot"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"}]}`),
			want: []string{`{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"screenshot","arguments":{}}],"timestamp":1767225601000}`,
				`{"role":"toolResult","content":[{"type":"text","text":"shot"},{"type":"image","data":"/9j/","mimeType":"image/jpeg"}],"toolCallId":"c2","toolName":"screenshot","isError":false,"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1}},
		{name: "a local shell call and a custom tool call", file: codexMeta +
			codexLine("response_item", `{"type":"local_shell_call","call_id":"ls1","status":"completed","action":{"type":"exec","command":["ls"],"timeout_ms":null,"working_directory":null,"env":null,"user":null}}`) +
			codexLine("response_item", `{"type":"custom_tool_call","status":"completed","call_id":"ct1","name":"apply_patch","input":"*** Begin Patch"}`) +
			codexLine("response_item", `{"type":"function_call_output","call_id":"ls1","output":"a.go"}`) +
			codexLine("response_item", `{"type":"custom_tool_call_output","call_id":"ct1","output":"Done"}`),
			want: []string{`{"role":"assistant","content":[{"type":"toolCall","id":"ls1","name":"local_shell","arguments":{"type":"exec","command":["ls"],"timeout_ms":null,"working_directory":null,"env":null,"user":null}},{"type":"toolCall","id":"ct1","name":"apply_patch","arguments":{"input":"*** Begin Patch"}}],"timestamp":1767225601000}`,
				`{"role":"toolResult","content":[{"type":"text","text":"a.go"}],"toolCallId":"ls1","toolName":"local_shell","isError":false,"timestamp":1767225601000}`,
				`{"role":"toolResult","content":[{"type":"text","text":"Done"}],"toolCallId":"ct1","toolName":"apply_patch","isError":false,"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1}},
		{name: "lines and items of no chat meaning are counted", file: codexMeta +
			codexLine("turn_context", `{"cwd":"/w","approval_policy":"on-request","sandbox_policy":{"mode":"read-only"},"model":"gpt-5","summary":"auto"}`) +
			codexLine("event_msg", `{"type":"token_count","info":null}`) +
			codexLine("compacted", `{"message":"summary of the session"}`) +
			codexLine("response_item", `{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]}`) +
			codexLine("response_item", `{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAA"}`) +
			codexLine("response_item", `{"type":"web_search_call","status":"completed","action":{"type":"search","query":"go"}}`) + user,
			want:    []string{`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1, "turn_context": 1, "event_msg": 1, "compacted": 1, "response_item/message/developer": 1, "response_item/reasoning": 1, "response_item/web_search_call": 1}},
		{name: "the user messages Codex writes itself are skipped by kind", file: codexMeta +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>\n\nAlways run the tests.\n\n</user_instructions>"}]}`) +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nUse gofmt.\n</INSTRUCTIONS>"}]}`) +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n  <shell>bash</shell>\n</environment_context>"}]}`) +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"  <ENVIRONMENT_CONTEXT><cwd>/w</cwd></ENVIRONMENT_CONTEXT>"}]}`) +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"<turn_aborted>\nThe user interrupted.\n</turn_aborted>"}]}`) +
			codexLine("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_shell_command>\n<command>ls</command>\n</user_shell_command>"}]}`) + user,
			want: []string{`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1767225601000}`},
			skipped: importfile.Skipped{"session_meta": 1, "response_item/message/user/user_instructions": 1, "response_item/message/user/agents_md": 1,
				"response_item/message/user/environment_context": 2, "response_item/message/user/turn_aborted": 1, "response_item/message/user/user_shell_command": 1}},
		{name: "an older rollout of bare response items", file: `{"id":"0196","timestamp":"2025-05-01T10:00:00Z","instructions":null}
{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}
{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}`,
			want:    []string{`{"role":"user","content":[{"type":"text","text":"hi"}]}`, `{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"shell","arguments":{}}]}`},
			skipped: importfile.Skipped{"untyped": 1}},
	})
}

// claudeLine is a line of a Claude Code session (~/.claude/projects/
// <project>/<session>.jsonl) as Claude Code 2.x writes it: the fields of
// its user and assistant lines, the message an Anthropic Messages API
// message, as the session files published in Claude Code's issues and
// the tools that read them show.
func claudeLine(typ, uuid, parent, message, extra string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"parentUuid":` + p + `,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.0.30","gitBranch":"main","type":"` + typ +
		`","message":` + message + `,"uuid":"` + uuid + `","timestamp":"2026-01-01T00:00:02.000Z"` + extra + "}\n"
}

// TestClaudeCodeSessionReadsEachLineKind: each kind of a Claude Code
// session's line is read into pi messages, tool-use ids kept, or skipped
// and counted by kind.
func TestClaudeCodeSessionReadsEachLineKind(t *testing.T) {
	ask := claudeLine("user", "u1", "", `{"role":"user","content":"take a screenshot"}`, "")
	// One assistant message, written a content block a line.
	think := claudeLine("assistant", "a1", "u1", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"use the tool","signature":"sig"}],"stop_reason":null}`, `,"requestId":"req_1"`)
	use := claudeLine("assistant", "a2", "a1", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Screenshot","input":{"full":true}}],"stop_reason":"tool_use"}`, `,"requestId":"req_1"`)
	result := claudeLine("user", "u2", "a2", `{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":[{"type":"text","text":"shot"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`,
		`,"toolUseResult":{"type":"image","file":{"base64":"iVBORw0KGgo=","type":"image/png","originalSize":8}}`)
	wantAsk := `{"role":"user","content":[{"type":"text","text":"take a screenshot"}],"timestamp":1767225602000}`
	wantAsst := `{"role":"assistant","content":[{"type":"thinking","thinking":"use the tool"},{"type":"toolCall","id":"toolu_1","name":"Screenshot","arguments":{"full":true}}],"timestamp":1767225602000}`
	wantResult := `{"role":"toolResult","content":[{"type":"text","text":"shot"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"toolCallId":"toolu_1","toolName":"Screenshot","isError":false,"timestamp":1767225602000}`
	runHostCases(t, []hostCase{
		{name: "a user line's string content", file: ask, want: []string{wantAsk}},
		{name: "an assistant message of several lines is one message; a tool_result with an image is a toolResult, its toolUseResult copy not read",
			file: ask + think + use + result, want: []string{wantAsk, wantAsst, wantResult}},
		{name: "a user line's image block", file: claudeLine("user", "u1", "", `{"role":"user","content":[{"type":"text","text":"this"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]}`, ""),
			want: []string{`{"role":"user","content":[{"type":"text","text":"this"},{"type":"image","data":"/9j/","mimeType":"image/jpeg"}],"timestamp":1767225602000}`}},
		{name: "an error result", file: claudeLine("assistant", "a1", "", `{"id":"m","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"false"}}]}`, "") +
			claudeLine("user", "u1", "a1", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"exit 1","is_error":true}]}`, ""),
			want: []string{`{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"Bash","arguments":{"command":"false"}}],"timestamp":1767225602000}`,
				`{"role":"toolResult","content":[{"type":"text","text":"exit 1"}],"toolCallId":"t","toolName":"Bash","isError":true,"timestamp":1767225602000}`}},
		{name: "lines of no chat meaning are counted", file: `{"type":"summary","summary":"screens","leafUuid":"u1"}` + "\n" +
			`{"type":"file-history-snapshot","messageId":"m","snapshot":{"trackedFileBackups":{}},"isSnapshotUpdate":false}` + "\n" + ask +
			claudeLine("user", "u3", "u1", `{"role":"user","content":"<command-name>/clear</command-name>"}`, `,"isMeta":true`) +
			claudeLine("system", "s1", "u3", `null`, `,"subtype":"compact_boundary","content":"Conversation compacted"`) +
			claudeLine("user", "u4", "s1", `{"role":"user","content":"This session is being continued"}`, `,"isCompactSummary":true`) +
			strings.Replace(claudeLine("user", "sc1", "u4", `{"role":"user","content":"subagent task"}`, ""), `"isSidechain":false`, `"isSidechain":true`, 1) +
			claudeLine("assistant", "a9", "u4", `{"id":"m9","role":"assistant","content":[{"type":"text","text":"ok"}]}`, ""),
			want:    []string{wantAsk, `{"role":"assistant","content":[{"type":"text","text":"ok"}],"timestamp":1767225602000}`},
			skipped: importfile.Skipped{"summary": 1, "file-history-snapshot": 1, "user/meta": 1, "system": 1, "user/compactSummary": 1, "sidechain": 1}},
		{name: "the branch the session ended on, after a rewind", file: ask +
			claudeLine("user", "u2", "u1", `{"role":"user","content":"left"}`, "") +
			claudeLine("user", "u3", "u1", `{"role":"user","content":"right"}`, ""),
			want:    []string{wantAsk, `{"role":"user","content":[{"type":"text","text":"right"}],"timestamp":1767225602000}`},
			skipped: importfile.Skipped{"off-branch": 1}},
	})
}
