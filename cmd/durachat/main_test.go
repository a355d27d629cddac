package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api/openapitest"
	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/config"
)

func lookup(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// checked checks every exchange of the package's tests that go through
// start against the OpenAPI document; TestMain reports what they covered.
var checked *openapitest.Validator

// start runs serve until the test ends and returns its base URL and a
// function that stops it and returns run's error. Every exchange through
// that URL is checked against the OpenAPI document.
func start(t *testing.T, env map[string]string) (string, func() error) {
	t.Helper()
	base, stop := startUnchecked(t, env)
	return openapitest.Proxy(t, checked, base), stop
}

// startUnchecked is start answering at the server's own address, for what
// names it (the memory browser's policy names the links' origin).
func startUnchecked(t *testing.T, env map[string]string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	result := make(chan error, 1)
	go func() {
		result <- run(ctx, []string{"serve"}, lookup(env), io.Discard, func(a net.Addr) { addrs <- a })
	}()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			cancel()
			runErr, stopped = <-result, true
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case a := <-addrs:
		return "http://" + a.String(), stop
	case err := <-result:
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not listen within 20 s")
	}
	return "", nil
}

func get(t *testing.T, url string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v", url, err)
	}
	return resp, body
}

func TestServeAnswersHealthzOnEmbeddedStores(t *testing.T) {
	base, stop := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()})
	resp, body := get(t, base+"/healthz")
	if resp.StatusCode != 200 || body["ok"] != true {
		t.Fatalf("healthz: %d %v", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	resp, body = get(t, base+"/v1/nothing")
	if resp.StatusCode != 404 || body["error"] == nil {
		t.Fatalf("unknown route: %d %v", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

func TestServeRestartsOnTheSameDataDirectory(t *testing.T) {
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()}
	for i := range 2 {
		base, stop := start(t, env)
		if resp, _ := get(t, base+"/healthz"); resp.StatusCode != 200 {
			t.Fatalf("start %d: healthz %d", i+1, resp.StatusCode)
		}
		if err := stop(); err != nil {
			t.Fatalf("start %d: stop: %v", i+1, err)
		}
	}
}

func TestServeRefusesAnOpenAddressWithoutTokens(t *testing.T) {
	err := run(context.Background(), nil, lookup(map[string]string{config.EnvAddr: "0.0.0.0:0", config.EnvData: t.TempDir()}), io.Discard, nil)
	var open *local.ErrOpenListen
	if !errors.As(err, &open) || !strings.Contains(err.Error(), config.EnvTokens) {
		t.Fatalf("err = %v, want a refusal naming %s", err, config.EnvTokens)
	}
}

func TestServeWithTokensKeepsHealthzOpen(t *testing.T) {
	base, _ := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir(), config.EnvTokens: "secret-token-0123456=acme"})
	if resp, _ := get(t, base+"/healthz"); resp.StatusCode != 200 {
		t.Fatalf("healthz needs no token: %d", resp.StatusCode)
	}
}

func TestBadConfigurationIsAClearError(t *testing.T) {
	err := run(context.Background(), nil, lookup(map[string]string{config.EnvModel: "gpt"}), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), config.EnvModel) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	var u usageError
	if err := run(context.Background(), []string{"frobnicate"}, lookup(nil), io.Discard, nil); !errors.As(err, &u) {
		t.Fatalf("err = %v", err)
	}
}

// pngB64 is a real 2x2 PNG, base64.
func pngB64(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{G: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func post(t *testing.T, url, token string, body any) (*http.Response, map[string]any) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: body is not JSON: %v", url, err)
	}
	return resp, out
}

func TestAnImageOffloadedBeforeARestartIsRestoredAfterIt(t *testing.T) {
	env := map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir(), config.EnvTokens: "token-a-0123456789=acme,token-b-0123456789=other"}
	b64 := pngB64(t)
	input := map[string]any{"message": map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "look"},
		map[string]any{"type": "image", "data": b64, "mimeType": "image/png"},
	}}}

	base, stop := start(t, env)
	if resp, _ := post(t, base+"/v1/chats/c1/hooks/offload-input", "", input); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("offload without a token: %d", resp.StatusCode)
	}
	resp, out := post(t, base+"/v1/chats/c1/hooks/offload-input", "token-a-0123456789", input)
	if resp.StatusCode != 200 {
		t.Fatalf("offload-input: %d %v", resp.StatusCode, out)
	}
	stored, _ := out["stored"].([]any)
	if len(stored) != 1 {
		t.Fatalf("stored %v", out["stored"])
	}
	ref := "[image " + stored[0].(string) + "]"
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	base, _ = start(t, env)
	restore := map[string]any{"format": "pi", "request": map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": ref}}},
	}}}
	resp, out = post(t, base+"/v1/chats/c1/hooks/before-request", "token-a-0123456789", restore)
	if resp.StatusCode != 200 || !strings.Contains(fmt.Sprint(out["request"]), b64) {
		t.Fatalf("before-request after restart: %d restored %v unrestored %v", resp.StatusCode, out["restored"], out["unrestored"])
	}
	// Another tenant's token does not reach acme's image.
	resp, out = post(t, base+"/v1/chats/c1/hooks/before-request", "token-b-0123456789", restore)
	if resp.StatusCode != 200 || strings.Contains(fmt.Sprint(out["request"]), b64) {
		t.Fatalf("other tenant: %d restored %v", resp.StatusCode, out["restored"])
	}
}
