package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/images/imagestest"

	"github.com/durachat/durachat/shared/images"
)

// exportPartLimit is the most bytes a part may take: the 4 MB budget and
// the one line that may cross it.
const exportPartLimit = 4<<20 + 1<<20

// noisyPNGBase64 is imagestest.NoisyPNG in base64.
func noisyPNGBase64(t *testing.T, seed uint64, w, h int) string {
	t.Helper()
	return base64.StdEncoding.EncodeToString(imagestest.NoisyPNG(seed, w, h))
}

// exportAll reads a chat's whole export part by part and returns its size
// and its largest part.
func (s *stressServer) exportAll(token, chat string) (total, largest int, err error) {
	after := ""
	for range 1000 {
		u := s.url + "/v1/chats/" + chat + "/export"
		if after != "" {
			u += "?after=" + url.QueryEscape(after)
		}
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil {
			return 0, 0, err
		}
		if res.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("export %s: status %d", u, res.StatusCode)
		}
		total, largest = total+int(n), max(largest, int(n))
		if after = res.Header.Get("Durachat-Export-Next"); after == "" {
			return total, largest, nil
		}
	}
	return 0, 0, fmt.Errorf("the export of %s did not end", chat)
}

// TestExportOfManyRefsPeakRSS: a message of 999 ref blocks to one image of
// about 264 KiB (once a 258 MiB part, the server near 1 GB), and one
// naming twelve images of about 507 KiB of base64, exported by eight
// clients at once, twice over: every part stays within its budget and the
// server's peak RSS within 512 MB.
func TestExportOfManyRefsPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: runs the server as a process")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the server's memory from /proc")
	}
	s := startStressServer(t)
	appendMsg := func(chat string, content []map[string]any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "timestamp": 1, "content": content}}})
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/chats/"+chat+"/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+stressTokenA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("append to %s: %d %.300s", chat, res.StatusCode, out)
		}
	}
	imageBlock := func(b64 string) map[string]any {
		return map[string]any{"type": "image", "mimeType": "image/png", "data": b64}
	}
	refBlocks := func(names ...string) []map[string]any {
		var out []map[string]any
		for _, n := range names {
			out = append(out, map[string]any{"type": "text", "text": "[image " + n + "]"})
		}
		return out
	}

	one := noisyPNGBase64(t, 1, 260, 260)
	appendMsg("refs", []map[string]any{imageBlock(one)})
	many := make([]string, 999)
	for i := range many {
		many[i] = images.Name(one)
	}
	appendMsg("refs", refBlocks(many...))
	var distinct []string
	for i := range 12 {
		img := noisyPNGBase64(t, uint64(10+i), 360, 360)
		appendMsg("wide", []map[string]any{imageBlock(img)})
		distinct = append(distinct, images.Name(img))
	}
	appendMsg("wide", refBlocks(distinct...))

	runtime.GC()
	time.Sleep(500 * time.Millisecond)
	idle, _ := s.memory(t)
	s.resetPeak()
	const clients = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		largest int
		sizes   = map[string]int{}
	)
	errs := make(chan error, clients*4)
	for c := range clients {
		wg.Go(func() {
			for round := range 2 {
				chat := []string{"refs", "wide"}[(c+round)%2]
				total, part, err := s.exportAll(stressTokenA, chat)
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				largest, sizes[chat] = max(largest, part), total
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, peak := s.memory(t)
	t.Logf("RESULT idle %d MB; %d clients exporting 999 refs to one image (%d bytes in all) and 12 distinct images of 507 KiB (%d bytes): largest part %d bytes, peak RSS %d MB",
		idle>>20, clients, sizes["refs"], sizes["wide"], largest, peak>>20)
	if largest > exportPartLimit {
		t.Errorf("a part of %d bytes, want at most %d", largest, exportPartLimit)
	}
	if peak > maxPeak {
		t.Errorf("peak RSS %d MB, aim at most %d MB", peak>>20, maxPeak>>20)
	}
}
