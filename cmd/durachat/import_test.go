package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/config"
)

// piSession is a pi 1.x session file: a system message first (its prompt
// and tools), then a "!" command's bash execution (pi 1.6's
// SessionMessageEntry and BashExecutionMessage, @earendil-works/
// pi-coding-agent), then the two messages durachat logs.
const piSession = `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}
{"type":"message","id":"p","parentId":null,"timestamp":"2026-01-01T00:00:00.500Z","message":{"role":"system","content":"You are pi.","toolsAdded":[{"name":"bash","description":"Run a command","parameters":{"type":"object"}}],"timestamp":1767225600500}}
{"type":"message","id":"x","parentId":"p","timestamp":"2026-01-01T00:00:00.700Z","message":{"role":"bashExecution","command":"git status","output":"clean","exitCode":0,"cancelled":false,"truncated":false,"timestamp":1767225600700}}
{"type":"message","id":"a","parentId":"x","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"fix the login","timestamp":1767225601000}}
{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":1767225602000}}
`

// messagesOf reads a chat back from a running server.
func messagesOf(t *testing.T, base, chat string) []string {
	t.Helper()
	res, err := http.Get(base + "/v1/chats/" + chat + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page struct {
		Messages []struct {
			Message json.RawMessage `json:"message"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		out = append(out, string(m.Message))
	}
	return out
}

func TestImportLoadsAPiSessionIntoADataDirOrThroughAServerOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(file, []byte(piSession), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each message as the session holds it, keys sorted.
	want := `{"content":"fix the login","role":"user","timestamp":1767225601000}` + "\n" +
		`{"content":[{"text":"done","type":"text"}],"role":"assistant","timestamp":1767225602000}`

	// Into the data directory of a server that is not running.
	// The second time says that nothing new was logged.
	said := func(chat string) []string {
		return []string{
			"imported 2 messages into " + chat + " as 2 entries (2 lines skipped: 1 message/bashExecution, 1 message/system)\n",
			"nothing new: " + chat + " holds the file's 2 messages already, as 2 entries (2 lines skipped: 1 message/bashExecution, 1 message/system)\n",
		}
	}
	dir := t.TempDir()
	env := map[string]string{config.EnvData: dir, config.EnvAddr: "127.0.0.1:0"}
	for i := range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"import", "-chat", "s1", file}, lookup(env), &out, nil); err != nil {
			t.Fatal(err)
		}
		if want := said("s1")[i]; out.String() != want {
			t.Fatalf("import %d said %q, want %q", i+1, out.String(), want)
		}
	}
	base, stop := start(t, env)
	if got := strings.Join(messagesOf(t, base, "s1"), "\n"); got != want {
		t.Fatalf("after importing twice into the data directory:\n%s\nwant\n%s", got, want)
	}

	// Through the server.
	for i := range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"import", "-chat", "s2", "-url", base, file}, lookup(nil), &out, nil); err != nil {
			t.Fatal(err)
		}
		if want := said("s2")[i]; out.String() != want {
			t.Fatalf("import %d through the server said %q, want %q", i+1, out.String(), want)
		}
	}
	if got := strings.Join(messagesOf(t, base, "s2"), "\n"); got != want {
		t.Fatalf("after importing twice through the server:\n%s\nwant\n%s", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err := run(t.Context(), []string{"import", file}, lookup(env), &out, nil)
	var usage usageError
	if !errors.As(err, &usage) {
		t.Fatalf("import without -chat = %v, want a usage error", err)
	}
}

// TestImportRefusesChatIDsTheAPIRefuses: an id the API cannot name (a
// slash, a dot segment, too long, a space) is a usage error before the
// data directory is opened, so nothing is written under it.
func TestImportRefusesChatIDsTheAPIRefuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(file, []byte(piSession), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, chat := range []string{"a/b", "..", ".", strings.Repeat("c", 300), "with space", "é"} {
		t.Run(chat[:min(len(chat), 12)], func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{config.EnvData: dir, config.EnvAddr: "127.0.0.1:0"}
			for _, args := range [][]string{{"import", "-chat", chat, file}, {"import", "-chat", chat, "-url", "http://127.0.0.1:1", file}} {
				var out bytes.Buffer
				err := run(t.Context(), args, lookup(env), &out, nil)
				var usage usageError
				if !errors.As(err, &usage) || !strings.Contains(err.Error(), "chat id") {
					t.Fatalf("%q = %v, want a usage error about the chat id", args, err)
				}
				if out.Len() > 0 {
					t.Errorf("%q printed %q", args, out.String())
				}
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
				t.Fatalf("the data directory holds %v (%v), want nothing written", entries, err)
			}
		})
	}
}

// TestImportHelpPrintsUsageAndSucceeds: -h (or -help) is a question, not
// a mistake: the usage goes to standard output and the command succeeds.
func TestImportHelpPrintsUsageAndSucceeds(t *testing.T) {
	for _, flag := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"import", flag}, lookup(nil), &out, nil); err != nil {
			t.Fatalf("import %s = %v, want nil", flag, err)
		}
		if out.String() != importUsage {
			t.Fatalf("import %s printed %q, want the usage", flag, out.String())
		}
	}
}

// TestImportLoadsACodexRolloutAndAClaudeCodeSession: a Codex CLI rollout
// (its RolloutLines, codex-rs/protocol) and a Claude Code session (its
// user and assistant lines) import as the pi messages they hold, tool
// calls and results with their ids, into a data directory and through a
// server alike, the lines of no chat meaning counted.
func TestImportLoadsACodexRolloutAndAClaudeCodeSession(t *testing.T) {
	files := map[string]struct{ file, said string }{
		"codex": {`{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"r","cwd":"/w","originator":"codex_cli_rs"}}
{"timestamp":"2026-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the login"}]}}
{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}}
{"timestamp":"2026-01-01T00:00:03.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"login.go"}}
`, "imported 3 messages into %s as 3 entries (1 line skipped: 1 session_meta)\n"},
		"claude": {`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"c","version":"2.0.0","type":"user","message":{"role":"user","content":"fix the login"},"uuid":"u1","timestamp":"2026-01-01T00:00:01.000Z"}
{"parentUuid":"u1","isSidechain":false,"sessionId":"c","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"uuid":"a1","timestamp":"2026-01-01T00:00:02.000Z"}
{"parentUuid":"a1","isSidechain":false,"sessionId":"c","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"login.go"}]},"uuid":"u2","timestamp":"2026-01-01T00:00:03.000Z","toolUseResult":{"stdout":"login.go"}}
{"type":"summary","summary":"login","leafUuid":"u2"}
`, "imported 3 messages into %s as 3 entries (1 line skipped: 1 summary)\n"},
	}
	dir := t.TempDir()
	env := map[string]string{config.EnvData: dir, config.EnvAddr: "127.0.0.1:0"}
	for host, f := range files {
		file := filepath.Join(t.TempDir(), "session.jsonl")
		if err := os.WriteFile(file, []byte(f.file), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(t.Context(), []string{"import", "-chat", host + "-dir", file}, lookup(env), &out, nil); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(f.said, host+"-dir"); out.String() != want {
			t.Fatalf("%s into the data directory said %q, want %q", host, out.String(), want)
		}
	}
	base, stop := start(t, env)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	for host, f := range files {
		file := filepath.Join(t.TempDir(), "session.jsonl")
		if err := os.WriteFile(file, []byte(f.file), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(t.Context(), []string{"import", "-chat", host, "-url", base, file}, lookup(env), &out, nil); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(f.said, host); out.String() != want {
			t.Fatalf("%s through the server said %q, want %q", host, out.String(), want)
		}
		for _, chat := range []string{host, host + "-dir"} {
			got := messagesOf(t, base, chat)
			if len(got) != 3 || !strings.Contains(got[1], `"toolCall"`) || !strings.Contains(got[2], `"toolCallId":`) {
				t.Fatalf("%s holds %q, want the user message, the call and its result", chat, got)
			}
		}
	}
}

// repeatedRollout is a Codex CLI rollout whose two halves are the same
// 50 messages: 25 calls of a tool, each with its output, with no
// timestamps (as a rollout repeats a call and its result).
func repeatedRollout() string {
	var b strings.Builder
	b.WriteString(`{"type":"session_meta","payload":{"id":"twice","cwd":"/w","originator":"codex_cli_rs"}}` + "\n")
	for range 2 * 25 {
		b.WriteString(`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"make\"]}","call_id":"call_1"}}` + "\n")
		b.WriteString(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"ok"}}` + "\n")
	}
	return b.String()
}

// TestImportLogsTheSameMessagesAtTwoPlacesOfAFileBoth: an append's
// receipt names its place in the file as well as its messages, so a file
// whose two halves are the same logs every message, into a data
// directory and through a server alike, and importing it again logs
// nothing twice.
func TestImportLogsTheSameMessagesAtTwoPlacesOfAFileBoth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rollout.jsonl")
	if err := os.WriteFile(file, []byte(repeatedRollout()), 0o600); err != nil {
		t.Fatal(err)
	}
	said := func(chat string) []string {
		return []string{
			"imported 100 messages into " + chat + " as 100 entries (1 line skipped: 1 session_meta)\n",
			"nothing new: " + chat + " holds the file's 100 messages already, as 100 entries (1 line skipped: 1 session_meta)\n",
		}
	}
	env := map[string]string{config.EnvData: t.TempDir(), config.EnvAddr: "127.0.0.1:0"}
	imports := func(chat string, url ...string) {
		t.Helper()
		for i := range 2 {
			var out bytes.Buffer
			args := append(append([]string{"import", "-chat", chat}, url...), file)
			if err := run(t.Context(), args, lookup(env), &out, nil); err != nil {
				t.Fatal(err)
			}
			if want := said(chat)[i]; out.String() != want {
				t.Fatalf("import %d into %s said %q, want %q", i+1, chat, out.String(), want)
			}
		}
	}
	imports("dir")
	base, stop := start(t, env)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	imports("server", "-url", base)
	for _, chat := range []string{"dir", "server"} {
		if n := len(messagesOf(t, base, chat)); n != 100 {
			t.Errorf("%s holds %d messages, want the file's 100", chat, n)
		}
	}
}
