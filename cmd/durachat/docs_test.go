package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/config"
)

// The documentation's examples, played against the local server: every
// shell example that runs curl or durachat, with each `# answer` comment
// under a command compared with what the command printed, and every JSON
// request (a block opening with "POST /v1/...") whose next block is its
// answer (opening with the status). "..." in a documented answer stands
// for anything; whitespace outside strings does not count, key order does.

// documented are the files whose examples claim answers, relative to
// this package.
var documented = []string{"../../README.md", "../../docs/api.md", "../../docs/hooks.md", "../../docs/integrate/curl.md"}

// onePixelPNG is the image the examples send.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// docSession is the pi session file the examples import.
const docSession = `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}
{"type":"model_change","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:00.500Z","provider":"anthropic","modelId":"claude-x"}
{"type":"message","id":"a","parentId":"m","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"fix the login","timestamp":1767225601000}}
{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":1767225602000}}
`

// fence is one fenced block of a Markdown file.
type fence struct {
	lang  string
	line  int // of the opening fence
	lines []string
}

func fences(t *testing.T, name string) []fence {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	var cur *fence
	for i, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "```"); ok {
			if cur == nil {
				cur = &fence{lang: strings.TrimSpace(rest), line: i + 1}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, l)
		}
	}
	return out
}

// shellCommand is one command of a shell example and the answer its
// comment lines claim ("" for none).
type shellCommand struct {
	text, claim string
	line        int
}

// shellCommands splits a shell block into commands: a command goes on
// past a trailing backslash and while a single quote is open.
func shellCommands(f fence) []shellCommand {
	var cmds []shellCommand
	var cur *shellCommand
	for i, l := range f.lines {
		if cur != nil && strings.Count(cur.text, "'")%2 == 1 || cur != nil && strings.HasSuffix(cur.text, "\\") {
			cur.text += "\n" + l
			continue
		}
		switch {
		case strings.HasPrefix(l, "#"):
			if cur != nil {
				cur.claim += strings.TrimPrefix(l, "#") + "\n"
			}
		case strings.TrimSpace(l) == "":
		default:
			if cur != nil {
				cmds = append(cmds, *cur)
			}
			cur = &shellCommand{text: l, line: f.line + 1 + i}
		}
	}
	if cur != nil {
		cmds = append(cmds, *cur)
	}
	return cmds
}

// runnable says whether a shell example talks to the server: it runs curl
// or durachat and nothing that builds, installs or starts a program.
func runnable(cmds []shellCommand) bool {
	talks := false
	for _, c := range cmds {
		first := strings.Fields(c.text)[0]
		switch first {
		case "curl", "durachat":
			talks = true
		case "make", "go", "npm", "pi", "sam":
			return false
		}
	}
	return talks
}

// record is the mark the test prints before each command's output.
const record = "\x1e"

// runShell runs the commands in one bash in dir, the local server at
// base (for localhost:8080 and $DURACHAT_URL), and returns each command's
// output. A command that writes its output to a file (`> up.json`) is
// answered by the file.
func runShell(t *testing.T, dir, base string, cmds []shellCommand) []string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	redirect := regexp.MustCompile(`>\s*(\S+)\s*$`)
	var script strings.Builder
	script.WriteString("set -e\n") // every command of an example succeeds
	for i, c := range cmds {
		text := strings.NewReplacer("localhost:8080", u.Host, "127.0.0.1:8080", u.Host).Replace(c.text)
		fmt.Fprintf(&script, "printf '%s%d\\n'\n%s\n", record, i, text)
		if m := redirect.FindStringSubmatch(text); m != nil {
			fmt.Fprintf(&script, "cat %s\n", m[1])
		}
	}
	sh := exec.Command("bash", "-c", script.String())
	sh.Dir = dir
	sh.Env = append(os.Environ(), "DURACHAT_URL="+base, "TOKEN=", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("the example failed: %v\n%s\nstderr:\n%s", err, script.String(), stderr.String())
	}
	outputs := make([]string, len(cmds))
	for _, part := range strings.Split(string(out), record)[1:] {
		n, rest, _ := strings.Cut(part, "\n")
		i, err := strconv.Atoi(n)
		if err != nil || i >= len(cmds) {
			t.Fatalf("unreadable output of the example: %q", part)
		}
		outputs[i] = rest
	}
	return outputs
}

// squeeze drops the whitespace outside JSON strings.
func squeeze(s string) string {
	var b strings.Builder
	in, esc := false, false
	for _, r := range s {
		switch {
		case in && esc:
			esc = false
		case in && r == '\\':
			esc = true
		case r == '"':
			in = !in
		case !in && (r == ' ' || r == '\n' || r == '\t' || r == '\r'):
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// answers reports whether got is what claim documents.
func answers(got, claim string) bool {
	pieces := strings.Split(squeeze(claim), "...")
	for i, p := range pieces {
		pieces[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("(?s)^" + strings.Join(pieces, ".*") + "$").MatchString(squeeze(got))
}

// docFixtures writes the files the examples read: shot.png (the image of
// the upload example), session.jsonl (the import example's) and the
// durachat binary itself.
func docFixtures(t *testing.T, dir string) {
	t.Helper()
	png, err := base64.StdEncoding.DecodeString(onePixelPNG)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"shot.png": png, "session.jsonl": []byte(docSession)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "durachat"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

var requestLine = regexp.MustCompile(`^(GET|POST|PUT|DELETE) (/\S+)$`)

func TestTheDocsExamplesAnswerWhatTheyClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds durachat and runs bash and curl")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples need %s: %v", tool, err)
		}
	}
	bin := t.TempDir()
	docFixtures(t, bin)
	for _, doc := range documented {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			base, _ := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()})
			dir := t.TempDir()
			for _, f := range []string{"shot.png", "session.jsonl", "durachat"} {
				if err := os.Symlink(filepath.Join(bin, f), filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
			blocks := fences(t, doc)
			checked := 0
			for i, f := range blocks {
				switch {
				case f.lang == "sh":
					cmds := shellCommands(f)
					if !runnable(cmds) {
						continue
					}
					for k, out := range runShell(t, dir, base, cmds) {
						if c := cmds[k]; c.claim != "" {
							checked++
							if !answers(out, c.claim) {
								t.Errorf("%s:%d: %s\nanswered:\n%s\nthe doc says:\n%s", doc, c.line, c.text, out, c.claim)
							}
						}
					}
				case f.lang == "json" && len(f.lines) > 0 && requestLine.MatchString(f.lines[0]) && i+1 < len(blocks):
					answer := blocks[i+1]
					if answer.lang != "json" || len(answer.lines) == 0 {
						continue
					}
					status, err := strconv.Atoi(strings.TrimSpace(answer.lines[0]))
					if err != nil {
						continue // the next block is another example, not this one's answer
					}
					checked++
					m := requestLine.FindStringSubmatch(f.lines[0])
					req, err := http.NewRequest(m[1], base+m[2], strings.NewReader(strings.Join(f.lines[1:], "\n")))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := walkClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(bufio.NewReader(resp.Body))
					resp.Body.Close()
					if err != nil {
						t.Fatal(err)
					}
					claim := strings.Join(answer.lines[1:], "\n")
					if resp.StatusCode != status || !answers(string(got), claim) {
						t.Errorf("%s:%d: %s\nanswered %d:\n%s\nthe doc says %d:\n%s", doc, f.line, f.lines[0], resp.StatusCode, got, status, claim)
					}
				}
			}
			if checked == 0 {
				t.Fatalf("%s: no example claims an answer", doc)
			}
			t.Logf("%s: %d answers checked", doc, checked)
		})
	}
}

// TestTheDocsGoProgramsRun: the README's Go program and the Go start
// page's, each built in a module of its own against this repository's
// client (as their install sections say) and run against the local
// server, print what they are documented to.
func TestTheDocsGoProgramsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	for _, tc := range []struct {
		doc  string
		want []*regexp.Regexp
	}{
		{"../../README.md", []*regexp.Regexp{
			regexp.MustCompile(`(?m)^<chat>\n0\+1\|user: Why does the login page fail\?\n</chat> 2$`),
			regexp.MustCompile(`(?m)^stored \[[0-9a-f]{16}\]$`),
			regexp.MustCompile(`(?m)^logged \[1 2\]$`),
		}},
		// The page shows the program's output, which it must print.
		{"../../docs/integrate/go.md", nil},
	} {
		t.Run(filepath.Base(tc.doc), func(t *testing.T) {
			blocks := fences(t, tc.doc)
			var programs []fence
			var printed string
			for i, f := range blocks {
				if f.lang == "go" {
					programs = append(programs, f)
					if i+1 < len(blocks) && blocks[i+1].lang == "" {
						printed = strings.Join(blocks[i+1].lines, "\n") + "\n"
					}
				}
			}
			if len(programs) != 1 {
				t.Fatalf("%s has %d Go blocks, want the one program", tc.doc, len(programs))
			}
			out := runGoProgram(t, programs[0].lines)
			if tc.want == nil && string(out) != printed {
				t.Errorf("%s:%d: the program printed\n%s\nthe doc says\n%s", tc.doc, programs[0].line, out, printed)
			}
			for _, want := range tc.want {
				if !want.Match(out) {
					t.Errorf("%s:%d: the program printed\n%s\nwant a match of %s", tc.doc, programs[0].line, out, want)
				}
			}
		})
	}
}

// runGoProgram builds a program in a module of its own that requires this
// repository's client, runs it against a local server of its own and
// returns what it printed.
func runGoProgram(t *testing.T, lines []string) []byte {
	t.Helper()
	clientDir, err := filepath.Abs("../../client")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module docprogram\n\ngo 1.22\n\nrequire github.com/durachat/durachat/client v0.0.0\n\nreplace github.com/durachat/durachat/client => " + clientDir + "\n"
	for name, data := range map[string]string{"go.mod": goMod, "main.go": strings.Join(lines, "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "program", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the program does not build: %v\n%s", err, out)
	}
	base, _ := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()})
	prog := exec.Command(filepath.Join(dir, "program"))
	prog.Env = append(os.Environ(), "DURACHAT_URL="+base, "DURACHAT_TOKEN=")
	out, err := prog.CombinedOutput()
	if err != nil {
		t.Fatalf("the program failed: %v\n%s", err, out)
	}
	return out
}

// TestTheUIDocQuotesTheServedPolicy: docs/ui.md quotes the memory
// browser's content security policy; it is the one the pages carry.
func TestTheUIDocQuotesTheServedPolicy(t *testing.T) {
	const header = "Content-Security-Policy: "
	var quoted []string
	for _, f := range fences(t, "../../docs/ui.md") {
		for _, l := range f.lines {
			if p, ok := strings.CutPrefix(l, header); ok {
				quoted = append(quoted, p)
			}
		}
	}
	if len(quoted) != 1 {
		t.Fatalf("docs/ui.md quotes %d policies, want one", len(quoted))
	}
	base, _ := startUnchecked(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()})
	resp, err := walkClient.Get(base + "/ui/index.html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The signed links' origin is the server's own here (its public URL).
	want := strings.ReplaceAll(quoted[0], "<links-origin>", base)
	if got := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != http.StatusOK || got != want {
		t.Fatalf("GET /ui/index.html: %d with the policy\n%s\ndocs/ui.md quotes\n%s", resp.StatusCode, got, want)
	}
}
