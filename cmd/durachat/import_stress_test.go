package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeScreenshotSession writes a pi 1.x session file (a tree, as pi 1.6
// writes it) of shots screenshot tool results, each an image of distinct
// noise (distinct images of about 0.75 MiB of base64, repeated in turn),
// and returns its size and the messages it holds.
func writeScreenshotSession(t *testing.T, path string, shots, distinct int) (size int64, messages int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	imgs := make([]string, distinct)
	for i := range imgs {
		imgs[i] = noisyPNGBase64(t, uint64(i+1), 440, 440)
	}
	parent := "null"
	entry := func(id int, msg any) {
		line, err := json.Marshal(map[string]any{"type": "message", "id": fmt.Sprintf("e%d", id), "timestamp": "2026-01-01T00:00:00.000Z", "message": msg})
		if err != nil {
			t.Fatal(err)
		}
		// parentId first, as pi writes it; null for the root.
		fmt.Fprintf(w, "{\"parentId\":%s,%s\n", parent, line[1:])
		parent = fmt.Sprintf("%q", fmt.Sprintf("e%d", id))
		messages++
	}
	fmt.Fprintln(w, `{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`)
	for i := range shots {
		call := fmt.Sprintf("call-%d", i)
		entry(3*i, map[string]any{"role": "user", "content": fmt.Sprintf("screenshot %d, please", i), "timestamp": 1767225600000 + i})
		entry(3*i+1, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": call, "name": "screenshot", "arguments": map[string]any{}}}, "stopReason": "toolUse", "timestamp": 1767225600000 + i})
		entry(3*i+2, map[string]any{"role": "toolResult", "toolCallId": call, "toolName": "screenshot", "isError": false, "timestamp": 1767225600000 + i,
			"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("shot %d", i)}, map[string]any{"type": "image", "mimeType": "image/png", "data": imgs[i%distinct]}}})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return fi.Size(), messages
}

// maxImportRSS bounds the import process's peak RSS well below what a
// reader of the whole 148 MiB file reaches (it held it three times over:
// 524 MiB). A streaming import peaked at 133-136 MiB on a quiet machine
// and at 255 MiB with other tests' processes beside it: the collector
// runs later when it gets less of the CPU, so the bound leaves that room.
const maxImportRSS = 320 << 20

// TestImportOfALargeFileHasBoundedMemoryAndSurvivesAKill: a 148 MiB pi
// session of 200 screenshots (about 0.75 MiB each, 40 distinct) imports into a data
// directory with the import's peak RSS under maxImportRSS; through a
// server, an import killed midway and run again logs each message once.
func TestImportOfALargeFileHasBoundedMemoryAndSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: writes a 200 MiB file and runs the import as a process")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the import's peak RSS from its rusage")
	}
	bin, err := buildServer()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	file := filepath.Join(t.TempDir(), "big.jsonl")
	size, messages := writeScreenshotSession(t, file, 200, 40)
	t.Logf("file: %d MiB, %d messages", size>>20, messages)

	imp := exec.Command(bin, "import", "-chat", "big", file)
	imp.Env = append(os.Environ(), "DURACHAT_DATA="+t.TempDir())
	out, err := imp.CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	peak := imp.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("into a data directory: %s peak RSS %d MiB", strings.TrimSpace(string(out)), peak>>20)
	if peak > maxImportRSS {
		t.Errorf("the import's peak RSS is %d MiB, want at most %d MiB", peak>>20, maxImportRSS>>20)
	}

	s := startStressServer(t)
	args := []string{"import", "-chat", "killed", "-url", s.url, "-token", stressTokenA, file}
	killed := exec.Command(bin, args...)
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once some of the file is logged, before it all is.
	for n := 0; n == 0; n = s.chatLen(t, "killed") {
		time.Sleep(20 * time.Millisecond)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	before := s.chatLen(t, "killed")
	if before >= messages {
		t.Fatalf("the import logged all %d messages before it was killed: nothing to check", before)
	}
	again, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("import again: %v: %s", err, again)
	}
	t.Logf("killed after %d messages, then: %s", before, strings.TrimSpace(string(again)))
	if n := s.chatLen(t, "killed"); n != messages {
		t.Fatalf("after the import was killed and run again the chat holds %d messages, want the file's %d, each once", n, messages)
	}
}

// chatLen is how many messages the chat holds, as the chat list says.
func (s *stressServer) chatLen(t *testing.T, chat string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/chats?limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+stressTokenA)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Chats []struct {
			Chat     string `json:"chat"`
			Messages int    `json:"messages"`
		} `json:"chats"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Chats {
		if c.Chat == chat {
			return c.Messages
		}
	}
	return 0
}
