//go:build unix

package stack_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/tokens"
)

// The deployed shape, end to end: the real bootstraps under the emulator,
// behind the template's routes and authorizer, fed by the template's event
// source mapping, over dynalite, the local S3 server and the local SQS
// server. One stack serves every subtest (it takes a while to build).

var client = &http.Client{Timeout: 60 * time.Second}

// startStack starts a stack for the test, or skips it: under -short, or
// when the emulator or the Node servers are not installed (outside CI,
// where they must be).
func startStack(t *testing.T, o stack.Options) *stack.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("the stack builds four functions and starts servers: not under -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{".tools/bin/aws-lambda-rie", "infra/dynalite/node_modules", "infra/sqs/node_modules"} {
		if _, err := os.Stat(filepath.Join(root, need)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: run `make tools`", need)
			}
			t.Skipf("%s is missing: run `make tools`", need)
		}
	}
	o.Root = root
	o.Logs = &tail{}
	// The stack's own warnings (an invocation that failed, a batch left on
	// the queue) are kept apart, so the functions' output cannot push
	// them out.
	events := &tail{}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(events, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	s, err := stack.Start(ctx, o)
	if err != nil {
		t.Fatalf("starting the stack: %v", err)
	}
	t.Logf("stack started in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("functions' output (last lines):\n%s", o.Logs)
			t.Logf("the stack's warnings (last lines):\n%s", events)
		}
	})
	return s
}

// tail keeps the last 64 KB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 64<<10 {
		w.buf = w.buf[len(w.buf)-64<<10:]
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// api is a caller of the stack's API with one bearer token.
type api struct {
	t     testing.TB
	base  string
	token string
}

// do sends body as JSON (nil for none) and returns the status and answer.
func (a api) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	res, err := client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res.StatusCode, raw
}

// ok sends body, requires a 200 and decodes the answer into out.
func (a api) ok(method, path string, body, out any) []byte {
	a.t.Helper()
	status, raw := a.do(method, path, body)
	if status != http.StatusOK {
		a.t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %s: %v", method, path, raw, err)
		}
	}
	return raw
}

type view struct {
	View      string `json:"view"`
	Lines     int64  `json:"lines"`
	Unbuilt   int64  `json:"unbuilt"`
	Stalled   bool   `json:"stalled"`
	LastError string `json:"lastError"`
}

// covered sums the entries the view's "<start>+<count>|" lines cover,
// checking that they tile the log from entry 0.
func covered(t testing.TB, v string) int64 {
	t.Helper()
	var next int64
	for _, line := range strings.Split(v, "\n") {
		label, _, ok := strings.Cut(line, "|")
		start, count, ok2 := strings.Cut(label, "+")
		if !ok || !ok2 {
			continue
		}
		a, err1 := strconv.ParseInt(start, 10, 64)
		n, err2 := strconv.ParseInt(count, 10, 64)
		if err1 != nil || err2 != nil || a != next {
			t.Fatalf("view line %q: want a block starting at entry %d", line, next)
		}
		next = a + n
	}
	return next
}

// built reads the chat's view until every line is built (through the
// queue and the compact function) and returns it.
func (a api) built(chat string, entries int64, within time.Duration) view {
	a.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var v view
		a.ok(http.MethodGet, "/v1/chats/"+chat+"/view?wait=turn", nil, &v)
		if got := covered(a.t, v.View); got != entries {
			a.t.Fatalf("the view covers %d entries, want %d", got, entries)
		}
		switch {
		case v.Stalled:
			a.t.Fatalf("the view stalled: %s", v.LastError)
		case v.Unbuilt == 0:
			return v
		case time.Now().After(deadline):
			status := a.ok(http.MethodGet, "/v1/chats/"+chat+"/status", nil, nil)
			a.t.Fatalf("%d lines still unbuilt after %s; the chat's status: %s", v.Unbuilt, within, status)
		}
	}
}

func pngBase64(t testing.TB, shade uint8) string {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for x := range 16 {
		for y := range 16 {
			img.Set(x, y, color.RGBA{shade, uint8(x * 16), uint8(y * 16), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestTheDeployedShapeServesTheAPIEndToEnd(t *testing.T) {
	t.Parallel() // each on a stack of its own
	s := startStack(t, stack.Options{})
	anon := api{t: t, base: s.URL}
	host := api{t: t, base: s.URL, token: s.DevToken}

	t.Run("TheHealthRouteAndTheBrowserArePublicAndEveryOtherNeedsAValidJWT", func(t *testing.T) {
		anon, host := anon, host
		anon.t, host.t = t, t
		if status, raw := anon.do(http.MethodGet, "/healthz", nil); status != http.StatusOK || string(raw) != "{\"ok\":true}\n" {
			t.Fatalf("healthz: %d %s", status, raw)
		}
		// The memory browser's pages are public; the data they read is not.
		if status, raw := anon.do(http.MethodGet, "/ui/index.html", nil); status != http.StatusOK || !strings.Contains(string(raw), "<title>durachat memory</title>") {
			t.Fatalf("the memory browser: %d %.200s", status, raw)
		}
		if status, raw := anon.do(http.MethodGet, "/v1/chats/demo/status", nil); status != http.StatusUnauthorized || !strings.Contains(string(raw), `"Unauthorized"`) {
			t.Fatalf("no token: %d %s", status, raw)
		}
		expired, err := s.Issuer.Token(map[string]any{"sub": "local", "aud": stack.Audience, "exp": time.Now().Add(-time.Minute).Unix()}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		otherAudience, _ := s.Issuer.Token(map[string]any{"sub": "local", "aud": "someone-else"}, time.Hour)
		forged := s.DevToken[:strings.LastIndex(s.DevToken, ".")] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 256))
		for name, tok := range map[string]string{"expired": expired, "other audience": otherAudience, "forged signature": forged} {
			if status, _ := (api{t: t, base: s.URL, token: tok}).do(http.MethodGet, "/v1/chats/demo/status", nil); status != http.StatusUnauthorized {
				t.Errorf("%s token: %d, want 401", name, status)
			}
		}
		host.ok(http.MethodGet, "/v1/chats/demo/status", nil, nil)
	})

	t.Run("TheTenantIsTheTokensSubClaim", func(t *testing.T) {
		host := host
		host.t = t
		host.ok(http.MethodPost, "/v1/chats/tenancy/messages", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "mine"}}}, nil)
		tok, err := s.Issuer.Token(map[string]any{"sub": "someone-else", "aud": stack.Audience}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		other := api{t: t, base: s.URL, token: tok}
		var v view
		other.ok(http.MethodGet, "/v1/chats/tenancy/view", nil, &v)
		if covered(t, v.View) != 0 {
			t.Fatalf("another tenant sees the chat: %q", v.View)
		}
		// A sub that is a dot segment would make links like
		// .../images/../<name>: no tenant, whatever the authorizer passes.
		for _, sub := range []string{"..", "."} {
			tok, err := s.Issuer.Token(map[string]any{"sub": sub, "aud": stack.Audience}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			dots := api{t: t, base: s.URL, token: tok}
			for _, path := range []string{"/v1/chats/tenancy/messages", "/v1/chats/tenancy/uploads"} {
				if status, raw := dots.do(http.MethodPost, path, map[string]any{}); status != http.StatusUnauthorized {
					t.Fatalf("sub %q: POST %s: %d %s, want 401", sub, path, status, raw)
				}
			}
		}
	})

	t.Run("TheWalkthroughLogsViewsAndZoomsThroughTheQueue", func(t *testing.T) {
		host := host
		host.t = t
		const messages = 20
		originals := make([]string, messages)
		for i := range messages {
			originals[i] = fmt.Sprintf("Message %d about the login page. %s", i, strings.Repeat("The café form posts to /login and answers 502. ", 15))
			var got struct{ IDs []int64 }
			host.ok(http.MethodPost, "/v1/chats/walk/messages", map[string]any{"receipt": fmt.Sprintf("turn-%d", i),
				"messages": []any{map[string]any{"role": "user", "content": originals[i]}}}, &got)
			if !slices.Equal(got.IDs, []int64{int64(i)}) {
				t.Fatalf("message %d logged as %v", i, got.IDs)
			}
		}
		// A retried append with the same receipt logs nothing twice.
		var again struct{ IDs []int64 }
		host.ok(http.MethodPost, "/v1/chats/walk/messages", map[string]any{"receipt": "turn-3",
			"messages": []any{map[string]any{"role": "user", "content": originals[3]}}}, &again)
		if !slices.Equal(again.IDs, []int64{3}) {
			t.Fatalf("a repeated receipt logged as %v", again.IDs)
		}
		v := host.built("walk", messages, 90*time.Second)
		if !strings.Contains(v.View, offline.Marker) {
			t.Fatalf("the view has no offline lines: %q", v.View)
		}
		var res struct {
			Content []struct{ Type, Text string } `json:"content"`
		}
		host.ok(http.MethodPost, "/v1/chats/walk/tools/zoom", map[string]any{"id": 0, "n": 1}, &res)
		if len(res.Content) != 1 || res.Content[0].Text != "user: "+originals[0] {
			t.Fatalf("zoom id=0 n=1: %+v", res.Content)
		}
	})

	t.Run("AnImageOver6MBIsUploadedStraightToS3AndClaimedByItsRef", func(t *testing.T) {
		host := host
		host.t = t
		// Noise barely compresses: about 7 MB of PNG (opaque: 3 bytes a
		// pixel), more than any Lambda invocation takes.
		img := image.NewNRGBA(image.Rect(0, 0, 1800, 1300))
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range img.Pix {
			img.Pix[i] = uint8(rng.Uint32())
		}
		for i := 3; i < len(img.Pix); i += 4 {
			img.Pix[i] = 255
		}
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		if len(data) <= 6<<20 {
			t.Fatalf("the image is only %d bytes", len(data))
		}
		sum := sha256.Sum256(data)
		name := images.Name(base64.StdEncoding.EncodeToString(data))
		var up struct {
			Stored bool
			Upload struct {
				Method, URL string
				Headers     map[string]string
			}
		}
		host.ok(http.MethodPost, "/v1/chats/upload/uploads", map[string]any{"name": name, "size": len(data), "type": "image/png", "sha256": hex.EncodeToString(sum[:])}, &up)
		if up.Stored || up.Upload.Method != http.MethodPut {
			t.Fatalf("upload answer %+v", up)
		}
		req, err := http.NewRequest(up.Upload.Method, up.Upload.URL, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range up.Upload.Headers {
			if k != "Content-Length" {
				req.Header.Set(k, v)
			}
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("PUT to the presigned URL: %d", res.StatusCode)
		}
		ref := "[image " + name + "]"
		host.ok(http.MethodPost, "/v1/chats/upload/hooks/after-tool", map[string]any{
			"call":   map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": ref}}},
		}, nil)
		host.ok(http.MethodPost, "/v1/chats/upload/messages", map[string]any{"messages": []any{
			map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "screenshot", "content": []any{map[string]any{"type": "text", "text": ref}}},
		}}, nil)
		var restored struct{ Restored []string }
		host.ok(http.MethodPost, "/v1/chats/upload/hooks/before-request", map[string]any{"format": "pi", "request": map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": ref}}}},
		}}, &restored)
		if len(restored.Restored) != 1 || restored.Restored[0] != name {
			t.Fatalf("restored %v, want [%s]", restored.Restored, name)
		}
		// Asked again, it is stored: nothing to upload.
		host.ok(http.MethodPost, "/v1/chats/upload/uploads", map[string]any{"name": name, "size": len(data), "type": "image/png", "sha256": hex.EncodeToString(sum[:])}, &up)
		if !up.Stored {
			t.Fatal("a claimed upload is not reported stored")
		}
	})

	t.Run("AChatIsListedReadBackAndDeletedWithTheImagesOnlyItNamed", func(t *testing.T) {
		host := host
		host.t = t
		shot := pngBase64(t, 77)
		host.ok(http.MethodPost, "/v1/chats/life/messages", map[string]any{"receipt": "life-1", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "see"},
				map[string]any{"type": "image", "data": shot, "mimeType": "image/png"}}}}}, nil)
		var list struct {
			Chats []struct {
				Chat     string `json:"chat"`
				Messages int64  `json:"messages"`
			} `json:"chats"`
		}
		host.ok(http.MethodGet, "/v1/chats?limit=100", nil, &list)
		if !slices.ContainsFunc(list.Chats, func(c struct {
			Chat     string `json:"chat"`
			Messages int64  `json:"messages"`
		}) bool {
			return c.Chat == "life" && c.Messages == 1
		}) {
			t.Fatalf("the list %+v lacks chat life with its message", list.Chats)
		}
		var page struct {
			Messages []struct {
				Seq     int64 `json:"seq"`
				Message struct {
					Content []struct{ Type, Text, URL string } `json:"content"`
				} `json:"message"`
			} `json:"messages"`
		}
		host.ok(http.MethodGet, "/v1/chats/life/messages?images=links", nil, &page)
		if len(page.Messages) != 1 || len(page.Messages[0].Message.Content) != 2 || page.Messages[0].Message.Content[1].URL == "" {
			t.Fatalf("read back %+v, want the message with a linked ref", page.Messages)
		}
		// The memory browser may show that link's image, from the
		// bucket's origin, and images from no other origin.
		res, err := client.Get(s.URL + "/ui/index.html")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		link, err := url.Parse(page.Messages[0].Message.Content[1].URL)
		if err != nil {
			t.Fatal(err)
		}
		var imgSrc []string
		for directive := range strings.SplitSeq(res.Header.Get("Content-Security-Policy"), ";") {
			if f := strings.Fields(directive); len(f) > 0 && f[0] == "img-src" {
				imgSrc = f[1:]
			}
		}
		if !slices.Contains(imgSrc, link.Scheme+"://"+link.Host) || slices.Contains(imgSrc, "https:") || slices.Contains(imgSrc, "http:") || slices.Contains(imgSrc, "*") {
			t.Fatalf("the browser's img-src %q: want the bucket's origin of %s and no wildcard", imgSrc, link.Redacted())
		}
		// A JSON answer, through the gateway and the function, is
		// neither sniffed nor cached.
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/chats/life/messages", nil)
		req.Header.Set("Authorization", "Bearer "+s.DevToken)
		if res, err = client.Do(req); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("a JSON answer's headers %v: want nosniff and no-store", res.Header)
		}
		var del struct {
			Deleted  bool `json:"deleted"`
			Progress struct {
				Images int `json:"images"`
			} `json:"progress"`
		}
		host.ok(http.MethodDelete, "/v1/chats/life", nil, &del)
		if !del.Deleted || del.Progress.Images != 1 {
			t.Fatalf("delete = %+v, want done with its image", del)
		}
		host.ok(http.MethodGet, "/v1/chats/life/messages", nil, &page)
		if len(page.Messages) != 0 {
			t.Fatalf("the deleted chat reads %+v", page.Messages)
		}
	})

	t.Run("AnErasedMessageIsGoneFromEveryRouteAndTheTable", func(t *testing.T) {
		host := host
		host.t = t
		eraseThroughTheGateway(t, s, host)
	})

	// The offload function records what it stores in the table the memory
	// function deletes chats from: the image is the hook's chat's.
	t.Run("AnImageTheOffloadFunctionStoredIsItsChatsAndGoesWithIt", func(t *testing.T) {
		host := host
		host.t = t
		shot := pngBase64(t, 91)
		var after struct {
			Stored []string `json:"stored"`
		}
		host.ok(http.MethodPost, "/v1/chats/hooked/hooks/after-tool", map[string]any{
			"call":   map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []any{map[string]any{"type": "image", "data": shot, "mimeType": "image/png"}}},
		}, &after)
		if len(after.Stored) != 1 {
			t.Fatalf("after-tool stored %v", after.Stored)
		}
		ref := "[image " + after.Stored[0] + "]"
		host.ok(http.MethodPost, "/v1/chats/logger/messages", map[string]any{"receipt": "l1", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "image", "data": shot, "mimeType": "image/png"}}}}}, nil)
		var del struct {
			Deleted  bool `json:"deleted"`
			Progress struct {
				Images int `json:"images"`
			} `json:"progress"`
		}
		restored := func(chat string) bool {
			var got struct {
				Restored []string `json:"restored"`
			}
			host.ok(http.MethodPost, "/v1/chats/"+chat+"/hooks/before-request", map[string]any{"format": "anthropic", "request": map[string]any{
				"model": "m", "max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": ref}}}}}}, &got)
			return len(got.Restored) == 1
		}
		host.ok(http.MethodDelete, "/v1/chats/logger", nil, &del)
		if !del.Deleted || del.Progress.Images != 0 || !restored("hooked") {
			t.Fatalf("deleting the other chat naming it = %+v, restored %v: want the image kept for the chat whose hook stored it", del, restored("hooked"))
		}
		host.ok(http.MethodDelete, "/v1/chats/hooked", nil, &del)
		if !del.Deleted || del.Progress.Images != 1 || restored("hooked") {
			t.Fatalf("deleting the hook's chat = %+v: want its image deleted with it", del)
		}
	})

	t.Run("AHostTurnWithImagesRestoresThemInEveryFormat", func(t *testing.T) {
		host := host
		host.t = t
		shot := pngBase64(t, 10)
		var after struct {
			Result struct {
				Content []json.RawMessage `json:"content"`
			} `json:"result"`
			Stored []string `json:"stored"`
		}
		host.ok(http.MethodPost, "/v1/chats/turn/hooks/after-tool", map[string]any{
			"call": map[string]any{"id": "c1", "name": "screenshot"},
			"result": map[string]any{"content": []any{
				map[string]any{"type": "text", "text": "Captured."},
				map[string]any{"type": "image", "data": shot, "mimeType": "image/png"},
			}},
		}, &after)
		if len(after.Stored) != 1 {
			t.Fatalf("after-tool stored %v", after.Stored)
		}
		ref := "[image " + after.Stored[0] + "]"
		var input struct {
			Message json.RawMessage `json:"message"`
			Stored  []string        `json:"stored"`
		}
		host.ok(http.MethodPost, "/v1/chats/turn/hooks/offload-input", map[string]any{"message": map[string]any{
			"role": "user", "timestamp": 1700000000000,
			"content": []any{map[string]any{"type": "text", "text": "What is this?"}, map[string]any{"type": "image", "data": pngBase64(t, 200), "mimeType": "image/png"}},
		}}, &input)
		if len(input.Stored) != 1 {
			t.Fatalf("offload-input stored %v", input.Stored)
		}
		userRef := "[image " + input.Stored[0] + "]"
		var logged struct{ IDs []int64 }
		host.ok(http.MethodPost, "/v1/chats/turn/messages", map[string]any{"receipt": "t1", "messages": []any{
			input.Message,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": "c1", "name": "screenshot", "arguments": map[string]any{}}}},
			map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "screenshot", "content": after.Result.Content, "isError": false},
		}}, &logged)
		if len(logged.IDs) != 3 {
			t.Fatalf("logged %v", logged.IDs)
		}
		host.built("turn", 3, 60*time.Second)

		requests := restoreRequests(userRef, ref)
		for format, req := range requests {
			var got struct {
				Request    json.RawMessage   `json:"request"`
				Restored   []string          `json:"restored"`
				Unrestored []json.RawMessage `json:"unrestored"`
			}
			host.ok(http.MethodPost, "/v1/chats/turn/hooks/before-request", map[string]any{"format": format, "request": req}, &got)
			want := []string{input.Stored[0], after.Stored[0]}
			slices.Sort(want)
			slices.Sort(got.Restored)
			if !slices.Equal(got.Restored, want) || len(got.Unrestored) != 0 {
				t.Errorf("%s: restored %v, unrestored %s; want %v", format, got.Restored, got.Unrestored, want)
			}
			if !bytes.Contains(got.Request, []byte(shot)) {
				t.Errorf("%s: the restored request does not carry the image's bytes", format)
			}
		}
		// Zoom carries the tool result's image back, by its name.
		var res struct {
			Content []struct{ Type, Data, Name string } `json:"content"`
		}
		host.ok(http.MethodPost, "/v1/chats/turn/tools/zoom", map[string]any{"id": 2, "n": 1}, &res)
		if len(res.Content) != 2 || res.Content[1].Type != "image" || res.Content[1].Data != shot || res.Content[1].Name != after.Stored[0] {
			t.Fatalf("zoom of the tool result: %+v", res.Content)
		}
	})

	t.Run("AppendsFromEightWritersBuildACompleteTree", func(t *testing.T) {
		host := host
		host.t = t
		// 200 appends race on the chat's state as a thousand do; make
		// test-long sends the thousand.
		writers, each := 8, 25
		if testenv.Long() {
			each = 125
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					body, _ := json.Marshal(map[string]any{"receipt": fmt.Sprintf("w%d-%d", w, i),
						"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("writer %d message %d: %s", w, i, strings.Repeat("load ", 20))}}})
					if _, _, err := appendUntil(s.URL+"/v1/chats/load/messages", s.DevToken, body, time.Now().Add(time.Minute)); err != nil {
						errs <- fmt.Errorf("writer %d message %d: %w", w, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		appended := time.Since(start)
		// The bound catches a hang: a build message lost on the way (a
		// function that died between claiming and sending) is found again
		// when its claim's three-minute lease lapses.
		v := host.built("load", int64(writers*each), 5*time.Minute)
		t.Logf("%d appends from %d writers in %s; built (%d lines) %s later", writers*each, writers, appended.Round(time.Millisecond), v.Lines, (time.Since(start) - appended).Round(time.Millisecond))
		// The view's lines are built; the merges below them that the view
		// does not show go on building. The whole tree is done when the
		// queue is empty, and the subtests after this one count on that.
		drained(t, s, 5*time.Minute)
		t.Logf("the whole tree built %s after the last append", (time.Since(start) - appended).Round(time.Millisecond))
	})

	t.Run("AnMCPHostZoomsToAnImageThroughTheGatewayAndItsAuthorizer", func(t *testing.T) {
		mcpThroughTheGateway(t, s)
	})

	t.Run("AnMCPHostFindsWhereToSignInAndTheIssuersTokenLetsItIn", func(t *testing.T) {
		mcpSignInThroughTheGateway(t, s)
	})

	t.Run("TheGatewayKeepsAPIGatewaysAndLambdasLimits", func(t *testing.T) {
		host := host
		host.t = t
		big := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("x", 7<<20)}}}
		if status, raw := host.do(http.MethodPost, "/v1/chats/limits/messages", big); status != http.StatusInternalServerError || !strings.Contains(string(raw), "Internal Server Error") {
			t.Errorf("a 7 MB event: %d %s; want API Gateway's 500 (Lambda refuses a payload over 6 MB)", status, raw)
		}
		huge := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("x", 11<<20)}}}
		if status, _ := host.do(http.MethodPost, "/v1/chats/limits/messages", huge); status != http.StatusRequestEntityTooLarge {
			t.Errorf("an 11 MB body: %d, want 413", status)
		}
		// $default sends unknown paths to the memory function's JSON 404.
		if status, raw := host.do(http.MethodGet, "/v1/nothing", nil); status != http.StatusNotFound || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("an unknown path: %d %s", status, raw)
		}
	})

	t.Run("ADeletedChatsIdNamesOnlyTheNewChatInEveryMemoryProcess", func(t *testing.T) {
		host := host
		host.t = t
		ctx := t.Context()
		// Two memory-function processes, each asked in turn from here on.
		if err := s.Functions["MemoryFunction"].Spread(2); err != nil {
			t.Fatal(err)
		}
		if n := len(s.Functions["MemoryFunction"].Emulators()); n < 2 {
			t.Fatalf("%d memory-function environments, want 2", n)
		}
		post := func(texts ...string) {
			t.Helper()
			var msgs []any
			for _, text := range texts {
				msgs = append(msgs, map[string]any{"role": "user", "content": text + " " + strings.Repeat("and more words that need a summary ", 30)})
			}
			host.ok(http.MethodPost, "/v1/chats/reuse/messages", map[string]any{"messages": msgs}, nil)
		}
		post("OLD-SECRET the launch code is 4242", "OLD-SECRET second")
		host.built("reuse", 2, 90*time.Second)
		for range 2 { // each process caches the old chat's lines
			if v := host.built("reuse", 2, time.Minute); !strings.Contains(v.View, "OLD-SECRET") {
				t.Fatalf("the old chat's view: %q", v.View)
			}
		}
		table := dynamo.New(s.DynamoDBClient, s.Table)
		old, _, err := chatid.New(table).Current(ctx, "local", "reuse")
		if err != nil || old.Inc == "" {
			t.Fatalf("the old chat's incarnation = %+v, %v", old, err)
		}
		var del struct{ Deleted bool }
		if host.ok(http.MethodDelete, "/v1/chats/reuse", nil, &del); !del.Deleted {
			t.Fatal("the chat was not deleted at once")
		}
		post("NEW-MESSAGE hello", "NEW-MESSAGE again")
		// The old chat's build messages reach the compact function again,
		// after the new chat exists.
		queue := sqsqueue.New(s.SQSClient, s.Queues["BuildQueue"])
		for _, n := range [][2]int64{{0, 0}, {0, 1}, {1, 0}} {
			body, _ := json.Marshal(map[string]any{"tenant": "local", "chat": "reuse", "n": old.Inc, "l": n[0], "i": n[1]})
			if err := queue.Send(ctx, string(body), 0); err != nil {
				t.Fatal(err)
			}
		}
		host.built("reuse", 2, 90*time.Second)
		drained(t, s, 2*time.Minute)
		for p := range 2 { // each process
			for _, route := range []struct{ method, path string }{
				{http.MethodGet, "/v1/chats/reuse/view"}, {http.MethodGet, "/v1/chats/reuse/tree?level=0"},
				{http.MethodGet, "/v1/chats/reuse/messages"}, {http.MethodPost, "/v1/chats/reuse/tools/zoom"},
			} {
				var body any
				if route.method == http.MethodPost {
					body = map[string]any{"id": 0, "n": 2}
				}
				raw := string(host.ok(route.method, route.path, body, nil))
				if strings.Contains(raw, "OLD-SECRET") || !strings.Contains(raw, "NEW-MESSAGE") {
					t.Errorf("process %d: %s %s = %.300s, want only the new chat", p, route.method, route.path, raw)
				}
			}
		}
		page, err := table.Query(ctx, store.Query{PK: old.PK()})
		if err != nil || len(page.Items) != 0 {
			t.Fatalf("the deleted incarnation's partition holds %d items (%v), want none", len(page.Items), err)
		}
	})

	t.Run("TheHourlyExpireMessageSweepsInStepsThroughTheQueue", func(t *testing.T) {
		ctx := t.Context()
		tok, err := s.Issuer.Token(map[string]any{"sub": "sweeper", "aud": stack.Audience}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		owner := api{t: t, base: s.URL, token: tok}
		say := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}
		owner.ok(http.MethodPost, "/v1/chats/kept/messages", say, nil)
		owner.ok(http.MethodPost, "/v1/chats/idle/messages", say, nil)
		// More idle chats than one sweep step reads, written straight into
		// the table as the code lays them out (an index item, an identity
		// item with its last activity), and chat idle's activity moved
		// back: every one idle 40 days.
		table := dynamo.New(s.DynamoDBClient, s.Table)
		ids := chatid.New(table)
		idleSince := fmt.Appendf(nil, `{"a":%d}`, time.Now().Add(-40*24*time.Hour).UnixMilli())
		rec, err := ids.Read(ctx, "sweeper", "idle")
		if err != nil || !rec.Recorded {
			t.Fatalf("chat idle's identity = %+v, %v", rec, err)
		}
		rec.State = idleSince
		if _, err := ids.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		idle := []string{"idle"}
		for i := range lifecycle.SweepChats + 20 {
			chat := fmt.Sprintf("seeded-%03d", i)
			idle = append(idle, chat)
			if err := table.Create(ctx, store.Item{Key: store.Key{PK: store.IndexPK("sweeper"), SK: store.IndexChatSK(chat)}, Body: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			if _, err := ids.Write(ctx, chatid.Record{Chat: chatid.Chat{Tenant: "sweeper", ID: chat}, State: idleSince}); err != nil {
				t.Fatal(err)
			}
		}
		owner.ok(http.MethodPut, "/v1/retention", map[string]any{"days": 30}, nil)
		// The schedule's message, as EventBridge puts it on the queue.
		if err := sqsqueue.New(s.SQSClient, s.Queues["BuildQueue"]).Send(ctx, `{"kind":"expire"}`, 0); err != nil {
			t.Fatal(err)
		}
		var list struct {
			Chats []struct {
				Chat string `json:"chat"`
			} `json:"chats"`
		}
		start := time.Now()
		for deadline := start.Add(5 * time.Minute); ; {
			owner.ok(http.MethodGet, "/v1/chats?limit=100", nil, &list)
			n := queued(t, s)
			if len(list.Chats) == 1 && n == 0 && s.Functions["CompactFunction"].Busy() == 0 {
				break
			}
			if time.Now().After(deadline) {
				for _, p := range s.Pollers {
					t.Logf("%s: %d invocations, %d failed, %d messages failed, %d deleted", p, p.Batches.Load(), p.Failed.Load(), p.ItemFailures.Load(), p.Deleted.Load())
				}
				t.Fatalf("the sweep left %d chats listed and %d messages queued, want chat kept alone and none", len(list.Chats), n)
			}
			t.Logf("after %s: %d chats listed, %d messages queued", time.Since(start).Round(time.Second), len(list.Chats), n)
			time.Sleep(2 * time.Second)
		}
		t.Logf("swept and deleted in %s", time.Since(start).Round(time.Second))
		if list.Chats[0].Chat != "kept" {
			t.Fatalf("the sweep kept %q, want the chat idle a few seconds", list.Chats[0].Chat)
		}
		for _, chat := range idle {
			if rec, err := ids.Read(ctx, "sweeper", chat); err != nil || rec.Recorded {
				t.Fatalf("expired chat %s: identity %+v, %v, want none", chat, rec, err)
			}
		}
	})
}

// queued is how many messages the build queue holds, visible or not.
// drained waits until the build queue is empty and no compact invocation
// runs, failing t after within.
func drained(t *testing.T, s *stack.Stack, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.Functions["CompactFunction"].Busy() > 0 || queued(t, s) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the build queue did not drain in %s: %d messages", within, queued(t, s))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func queued(t *testing.T, s *stack.Stack) int {
	t.Helper()
	out, err := s.SQSClient.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.Queues["BuildQueue"]),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// restoreRequests are a before-request body in each format, each ref alone
// in a text block where an image may go: userRef in a user message, ref in
// pi's tool result and in the same user message for the other formats.
func restoreRequests(userRef, ref string) map[string]any {
	return map[string]any{
		"pi": map[string]any{"systemPrompt": "be brief", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": userRef}}, "timestamp": 1},
			map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "screenshot", "content": []any{map[string]any{"type": "text", "text": ref}}, "isError": false, "timestamp": 2},
		}},
		"anthropic": map[string]any{"model": "claude-x", "max_tokens": 64, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": userRef}, map[string]any{"type": "text", "text": ref}}},
		}},
		"bedrock": map[string]any{"modelId": "m", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"text": userRef}, map[string]any{"text": ref}}},
		}},
		"openai": map[string]any{"model": "gpt-x", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": userRef}, map[string]any{"type": "text", "text": ref}}},
		}},
	}
}

// post sends body as JSON with token and returns the status, the answer
// and its Retry-After.
func post(url, token string, body []byte) (int, []byte, time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	retryAfter, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	return res.StatusCode, raw, time.Duration(retryAfter) * time.Second, err
}

func TestWithTokensTheStackDeploysTheTemplatesBearerTokenFallback(t *testing.T) {
	t.Parallel() // each on a stack of its own
	s := startStack(t, stack.Options{Tokens: "secret-a-0123456789=tenant-a"})
	if s.Issuer != nil || s.DevToken != "" || len(s.Template.Authorizers) != 0 {
		t.Fatal("a stack with tokens has a JWT authorizer")
	}
	anon := api{t: t, base: s.URL}
	if status, raw := anon.do(http.MethodGet, "/v1/chats/demo/status", nil); status != http.StatusUnauthorized || !strings.Contains(string(raw), `"error"`) {
		t.Fatalf("no token: %d %s; want the function's JSON 401", status, raw)
	}
	if status, _ := (api{t: t, base: s.URL, token: "wrong"}).do(http.MethodGet, "/v1/chats/demo/status", nil); status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", status)
	}
	(api{t: t, base: s.URL, token: "secret-a-0123456789"}).ok(http.MethodGet, "/v1/chats/demo/status", nil, nil)

	// The tokens are the secret's, read through ApiTokensSecret: a token
	// added to it works once the functions' miss interval has passed.
	if !strings.HasPrefix(s.TokensSecret, "arn:aws:secretsmanager:") {
		t.Fatalf("tokens secret %q", s.TokensSecret)
	}
	sm, _ := s.SecretsClients()
	if _, err := sm.PutSecretValue(context.Background(), &secretsmanager.PutSecretValueInput{SecretId: aws.String(s.TokensSecret),
		SecretString: aws.String("secret-a-0123456789=tenant-a,secret-b-0123456789=tenant-b")}); err != nil {
		t.Fatal(err)
	}
	tokenB := api{t: t, base: s.URL, token: "secret-b-0123456789"}
	deadline := time.Now().Add(tokens.DefaultMissInterval + 20*time.Second)
	for {
		status, raw := tokenB.do(http.MethodGet, "/v1/chats/demo/status", nil)
		if status == http.StatusOK {
			break
		}
		if status != http.StatusUnauthorized || time.Now().After(deadline) {
			t.Fatalf("the added token: %d %s", status, raw)
		}
		time.Sleep(time.Second)
	}
}

// eraseThroughTheGateway logs three messages, the middle one holding a
// number no other message holds, builds the chat's tree, erases that
// message through the memory function and waits for the receipt to say
// done (its ancestors rebuilt by the compact function through the queue).
// Then no route shows the number and no item of the table holds it: the
// text, its record, the search index and every summary line rebuilt.
func eraseThroughTheGateway(t *testing.T, s *stack.Stack, host api) {
	const secret = "QZ7734219"
	say := []string{"the weather is mild", "my passport number is " + secret, "the train leaves at nine"}
	for i, text := range say {
		host.ok(http.MethodPost, "/v1/chats/forgets/messages", map[string]any{"receipt": fmt.Sprintf("forgets-%d", i),
			"messages": []any{map[string]any{"role": "user", "content": text}}}, nil)
	}
	host.built("forgets", int64(len(say)), 3*time.Minute)
	var page struct {
		Messages []struct {
			Seq    int64           `json:"seq"`
			Erased string          `json:"erased"`
			Msg    json.RawMessage `json:"message"`
		} `json:"messages"`
	}
	host.ok(http.MethodGet, "/v1/chats/forgets/messages", nil, &page)
	if len(page.Messages) != len(say) {
		t.Fatalf("read back %d messages, want %d", len(page.Messages), len(say))
	}
	var receipt wire.Erasure
	status, raw := host.do(http.MethodPost, "/v1/chats/forgets/erase", wire.EraseRequest{Seqs: []int64{page.Messages[1].Seq}})
	if status != http.StatusOK && status != http.StatusAccepted {
		t.Fatalf("erase: %d %s", status, raw)
	}
	if err := json.Unmarshal(raw, &receipt); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); !receipt.Done; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the erasure is not done after 3 minutes: %+v", receipt)
		}
		host.ok(http.MethodGet, "/v1/chats/forgets/erasures/"+receipt.Erasure, nil, &receipt)
	}
	if len(receipt.Messages) != 1 || receipt.Messages[0].Seq != page.Messages[1].Seq {
		t.Fatalf("the receipt erased %+v, want message %d", receipt.Messages, page.Messages[1].Seq)
	}
	page.Messages = nil // decoded afresh: a field the answer leaves out must read as absent
	host.ok(http.MethodGet, "/v1/chats/forgets/messages", nil, &page)
	if len(page.Messages) != len(say) || page.Messages[1].Erased == "" || len(page.Messages[1].Msg) != 0 {
		t.Fatalf("read back after the erasure: %+v, want message 1 a tombstone", page.Messages)
	}
	host.ok(http.MethodPut, "/v1/chats/forgets/memory/settings", map[string]any{"search": true}, nil)
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/chats/forgets/messages", nil},
		{http.MethodGet, "/v1/chats/forgets/view", nil},
		{http.MethodGet, "/v1/chats/forgets/export", nil},
		{http.MethodPost, "/v1/chats/forgets/tools/search", map[string]any{"text": secret}},
		{http.MethodPost, "/v1/chats/forgets/tools/search", map[string]any{"text": "passport number"}},
	} {
		// A search's answer repeats its query: what it must not show is
		// the erased sentence.
		if raw := host.ok(call.method, call.path, call.body, nil); bytes.Contains(raw, []byte("number is "+secret)) {
			t.Errorf("%s %s still shows the erased number: %.300s", call.method, call.path, raw)
		}
	}
	p := dynamodb.NewScanPaginator(s.DynamoDBClient, &dynamodb.ScanInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			// Keys and the search index's terms are strings, bodies are
			// binary: each is searched as the bytes stored.
			var data []byte
			for _, v := range it {
				switch v := v.(type) {
				case *dynamotypes.AttributeValueMemberS:
					data = append(append(data, v.Value...), 0)
				case *dynamotypes.AttributeValueMemberB:
					data = append(append(data, v.Value...), 0)
				}
			}
			if bytes.Contains(bytes.ToLower(data), bytes.ToLower([]byte(secret))) {
				t.Errorf("an item of the table still holds the erased number: %.300q", data)
			}
		}
	}
}
