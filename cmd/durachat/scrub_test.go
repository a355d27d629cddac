package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
)

// noisePNG is a side x side PNG of random pixels (about 16 KB at 64) that
// compress to nothing, so a run of them found in a file is this image and
// no other.
func noisePNG(t *testing.T, side int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	px := make([]byte, 4)
	for y := range side {
		for x := range side {
			rand.Read(px)
			img.Set(x, y, color.RGBA{R: px[0], G: px[1], B: px[2], A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// leftIn lists which of the needles some file of dir holds.
func leftIn(t *testing.T, dir string, needles map[string][]byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, n := range needles {
			if bytes.Contains(raw, n) {
				found = append(found, d.Name()+": "+what)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestADeletedChatLeavesNoBytesInTheDataDirectory: a chat logs a message
// with a distinctive text and an image; once its DELETE answers done, no
// file of the data directory holds the text or the image's bytes (raw or
// base64), while the server runs, after a restart and after later writes.
func TestADeletedChatLeavesNoBytesInTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: dir}
	text := "passport number " + rand.Text()
	pngData := noisePNG(t, 64)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	msg := func(text string, withImage bool) map[string]any {
		content := []any{map[string]any{"type": "text", "text": text}}
		if withImage {
			content = append(content, map[string]any{"type": "image", "data": b64, "mimeType": "image/png"})
		}
		return map[string]any{"messages": []any{map[string]any{"role": "user", "content": content, "timestamp": 1}}}
	}

	base, stop := start(t, env)
	for _, c := range []struct {
		chat      string
		text      string
		withImage bool
	}{{"other", "nothing to hide", false}, {"secret", text, true}, {"other", "still nothing", false}} {
		if resp, out := post(t, base+"/v1/chats/"+c.chat+"/messages", "", msg(c.text, c.withImage)); resp.StatusCode != 200 {
			t.Fatalf("append to %s: %d %v", c.chat, resp.StatusCode, out)
		}
	}
	resp, err := http.Get(base + "/v1/chats/secret/images/" + images.Name(b64))
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(stored) < 4096 {
		t.Fatalf("the image as stored: %d, %d bytes", resp.StatusCode, len(stored))
	}
	storedB64 := base64.StdEncoding.EncodeToString(stored)
	needles := map[string][]byte{
		"text":                []byte(text),
		"text in JSON":        []byte(text[len("passport number "):]),
		"image":               pngData[2000:2064],
		"image as stored":     stored[len(stored)/2 : len(stored)/2+64],
		"image base64":        []byte(b64[3000:3064]),
		"stored image base64": []byte(storedB64[len(storedB64)/2 : len(storedB64)/2+64]),
	}
	if found := leftIn(t, dir, needles); len(found) == 0 {
		t.Fatal("before the deletion no file holds the chat's bytes: the check cannot fail")
	}

	for i := 0; ; i++ {
		req, _ := http.NewRequest(http.MethodDelete, base+"/v1/chats/secret", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 202 || i == 100 {
			t.Fatalf("DELETE: %d after %d calls", resp.StatusCode, i+1)
		}
	}
	if found := leftIn(t, dir, needles); len(found) > 0 {
		t.Fatalf("once the deletion is done the data directory still holds %q", found)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	base, _ = start(t, env)
	for i := range 20 {
		if resp, out := post(t, base+"/v1/chats/other/messages", "", msg("later "+string(rune('a'+i)), false)); resp.StatusCode != 200 {
			t.Fatalf("append after the restart: %d %v", resp.StatusCode, out)
		}
	}
	if found := leftIn(t, dir, needles); len(found) > 0 {
		t.Fatalf("after a restart and later writes the data directory holds %q", found)
	}
}

// TestAnErasedMessageLeavesNoBytesInTheDataDirectory: a chat logs a
// message with a distinctive text and an image between two others; once
// its erasure is done, no file of the data directory holds the text or the
// image's bytes, and the other messages read back as logged.
func TestAnErasedMessageLeavesNoBytesInTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	// The image's bytes go once the erasure settles, SettleAfter after it.
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: dir, config.EnvSettleAfter: "1s"}
	// A text and an image of many pages each, more than the erasure's own
	// writes take again from the pages it frees.
	secret := "passport number " + strings.Repeat(rand.Text(), 2000)
	pngData := noisePNG(t, 256)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	base, _ := start(t, env)
	for _, m := range []map[string]any{
		{"role": "user", "content": "nothing to hide", "timestamp": 1},
		{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": secret},
			map[string]any{"type": "image", "data": b64, "mimeType": "image/png"},
		}, "timestamp": 2},
		{"role": "user", "content": "still nothing", "timestamp": 3},
	} {
		if resp, out := post(t, base+"/v1/chats/c/messages", "", map[string]any{"messages": []any{m}}); resp.StatusCode != 200 {
			t.Fatalf("append: %d %v", resp.StatusCode, out)
		}
	}
	needles := map[string][]byte{
		"text":         []byte(secret[len(secret)-64:]),
		"image":        pngData[2000:2064],
		"image base64": []byte(b64[3000:3064]),
	}
	if found := leftIn(t, dir, needles); len(found) == 0 {
		t.Fatal("before the erasure no file holds the message's bytes: the check cannot fail")
	}
	resp, out := post(t, base+"/v1/chats/c/erase", "", map[string]any{"match": secret[:64]})
	if resp.StatusCode != 200 && resp.StatusCode != 202 {
		t.Fatalf("erase: %d %v", resp.StatusCode, out)
	}
	id, _ := out["erasure"].(string)
	for i := 0; out["done"] != true; i++ {
		if i == 600 {
			t.Fatalf("the erasure is not done after %d reads: %v", i, out)
		}
		time.Sleep(50 * time.Millisecond)
		out = getJSON(t, base+"/v1/chats/c/erasures/"+id)
	}
	if found := leftIn(t, dir, needles); len(found) > 0 {
		t.Fatalf("once the erasure is done the data directory still holds %q", found)
	}
	page := getJSON(t, base+"/v1/chats/c/messages")
	if msgs, _ := page["messages"].([]any); len(msgs) != 3 {
		t.Fatalf("read-back after the erasure: %v", page)
	}
}

// getJSON answers the JSON object a GET of url answers with 200.
func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return out
}
