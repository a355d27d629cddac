package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/config"
)

// TestShrinkWritesTheSessionWithRefsThatNameTheStoredImages: durachat
// shrink imports a pi session of screenshots and writes it again, every
// entry kept, a fraction of its size: it reads as the same session (the
// same messages, each image a ref), and its refs name the images the
// import stored, so it imports in turn.
func TestShrinkWritesTheSessionWithRefsThatNameTheStoredImages(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shots.jsonl")
	size, messages := writeScreenshotSession(t, file, 6, 3)
	env := map[string]string{config.EnvData: t.TempDir(), config.EnvAddr: "127.0.0.1:0"}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"shrink", "-chat", "shots", file}, lookup(env), &out, nil); err != nil {
		t.Fatal(err)
	}
	if int64(out.Len())*20 > size {
		t.Fatalf("shrunk to %d bytes of %d, want at most a twentieth", out.Len(), size)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(out.String(), "\n"), strings.Count(string(data), "\n"); got != want {
		t.Fatalf("the shrunk file has %d lines, the file %d", got, want)
	}
	items, _, err := importfile.Parse(bytes.NewReader(out.Bytes()))
	if err != nil || len(items) != messages {
		t.Fatalf("the shrunk file reads as %d messages (%v), want the file's %d", len(items), err, messages)
	}
	if refs := strings.Count(out.String(), `"text":"[image `); refs != 6 {
		t.Fatalf("the shrunk file holds %d refs, want one a screenshot", refs)
	}
	shrunk := filepath.Join(t.TempDir(), "shrunk.jsonl")
	if err := os.WriteFile(shrunk, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var said bytes.Buffer
	if err := run(t.Context(), []string{"import", "-chat", "again", shrunk}, lookup(env), &said, nil); err != nil {
		t.Fatalf("the shrunk file does not import: %v", err)
	}
}
