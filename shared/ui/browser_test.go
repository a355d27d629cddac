package ui_test

// The memory browser in a real headless Chromium (Debian's chromium, which
// `make tools` installs), driven with chromedp against the local server:
// one browser for the test binary, one tab per test. Skipped under -short.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
)

// failMarker in an entry makes the test compactor answer 503 for its leaf.
const failMarker = "PLEASE-FAIL"

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	stopBrowser = func() {}
	// scratch holds the data of the servers the tests start; TestMain
	// makes it and removes it when the tests end.
	scratch string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "durachat-ui-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	stopBrowser()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// chromiumPath finds the browser `make tools` installs.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: run `make tools` (it installs Debian's chromium package)")
}

// tab opens a new tab of the one browser of this test binary, with a
// deadline, and collects its console errors.
func tab(t *testing.T) (context.Context, *consoleLog) {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a headless Chromium; skipped under -short")
	}
	browserOnce.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			browserErr = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		stopBrowser = func() { cancel(); cancelAlloc() }
		browserCtx = ctx
		browserErr = chromedp.Do(ctx) // starts the browser
	})
	if browserErr != nil {
		t.Fatalf("starting the browser: %v", browserErr)
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatal(err)
	}
	log := &consoleLog{}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				log.add(m)
			}
		}
	}()
	tctx, tcancel := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(tcancel)
	return tctx, log
}

// consoleLog holds a tab's console errors and uncaught exceptions.
type consoleLog struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func (c *consoleLog) add(m chromedp.ConsoleMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
}

// check fails t on any console error but those allowed.
func (c *consoleLog) check(t *testing.T, allowed func(m chromedp.ConsoleMessage) bool) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // the last events reach the log
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if !m.IsException() && allowed(m) {
			continue
		}
		t.Errorf("console %s at %s:%d: %s", m.Type, m.URL, m.Line+1, m.Text)
	}
}

// failedLoad reports whether m is the browser's own log of a load that
// failed with status.
func failedLoad(m chromedp.ConsoleMessage, status int) bool {
	return strings.HasPrefix(m.Text, "Failed to load resource") && strings.Contains(m.Text, fmt.Sprintf("status of %d", status))
}

// server is a local server (durachat serve) with its own data directory and
// a test compactor: a line per node, 503 for a leaf with failMarker.
type server struct {
	url    string
	tokens map[string]string
}

var (
	sharedOnce sync.Once
	shared     *server
)

// sharedServer is the server without tokens the tests share (each uses
// its own chats).
func sharedServer(t *testing.T) *server {
	t.Helper()
	sharedOnce.Do(func() { shared = startServer(t, nil) })
	if shared == nil {
		t.Fatal("the shared server did not start")
	}
	return shared
}

func startServer(t *testing.T, tokens map[string]string) *server {
	t.Helper()
	comp := httptest.NewServer(http.HandlerFunc(testCompactor))
	// The server outlives the test that started it (the tests share it);
	// the process ends it.
	// The port is the one the server gets (":0"); its links name it.
	env := map[string]string{
		config.EnvAddr: "127.0.0.1:0", config.EnvData: tempDir(t), config.EnvCompactorURL: comp.URL,
		config.EnvLogLevel: "error",
	}
	var pairs []string
	for tok, tenant := range tokens {
		pairs = append(pairs, tok+"="+tenant)
	}
	if len(pairs) > 0 {
		env[config.EnvTokens] = strings.Join(pairs, ",")
	}
	cfg, err := config.Load(config.Serve, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan net.Addr, 1)
	failed := make(chan error, 1)
	go func() {
		failed <- local.Serve(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(a net.Addr) { ready <- a })
	}()
	select {
	case a := <-ready:
		return &server{url: "http://" + a.String(), tokens: tokens}
	case err := <-failed:
		t.Fatalf("the server did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not start in 20 s")
	}
	return nil
}

// tempDir is a directory that outlives the test (the shared server keeps
// using it); TestMain removes it with scratch.
func tempDir(t *testing.T) string {
	d, err := os.MkdirTemp(scratch, "server-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testCompactor writes "summary of <label>" and names the images the
// source names, or answers 503 for a leaf carrying failMarker.
func testCompactor(w http.ResponseWriter, r *http.Request) {
	var req compactor.CustomRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if strings.Contains(req.Source, failMarker) {
		http.Error(w, "the model is overloaded", http.StatusServiceUnavailable)
		return
	}
	line := "summary of " + req.Label
	for _, m := range refPattern.FindAllString(req.Source, -1) {
		line += " " + m
	}
	_ = json.NewEncoder(w).Encode(compactor.CustomReply{Line: &line})
}

var refPattern = regexp.MustCompile(`\[image [0-9a-f]{16}\]`)

// call sends one API request with the server's first token, if any.
func (s *server) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	code, out, err := s.request(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, out
}

// request is call for code that may not stop the test (a handler).
func (s *server) request(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for tok := range s.tokens {
		req.Header.Set("Authorization", "Bearer "+tok)
		break
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// missing reports whether the server answers GET path with 404 or 405: a
// route of another feature it does not have yet.
func (s *server) missing(t *testing.T, path string) bool {
	code, _ := s.call(t, "GET", path, nil)
	return code == http.StatusNotFound || code == http.StatusMethodNotAllowed
}

// missingRoutes allows the browser's log of a 404 or 405 from a route the server
// does not have: the page asks for it, says it is missing, and logs
// nothing itself.
func (s *server) missingRoutes(t *testing.T) func(chromedp.ConsoleMessage) bool {
	return func(m chromedp.ConsoleMessage) bool {
		u, err := url.Parse(m.URL)
		return err == nil && (failedLoad(m, http.StatusNotFound) || failedLoad(m, http.StatusMethodNotAllowed)) && s.missing(t, u.Path)
	}
}

// logMessages appends pi messages to chat.
func (s *server) logMessages(t *testing.T, chat string, msgs ...map[string]any) {
	t.Helper()
	code, body := s.call(t, "POST", "/v1/chats/"+chat+"/messages", map[string]any{"messages": msgs})
	if code != 200 {
		t.Fatalf("append: %d %s", code, body)
	}
}

// waitStatus polls the chat's status until ok accepts it.
func (s *server) waitStatus(t *testing.T, chat string, ok func(wire.Status) bool) wire.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := s.call(t, "GET", "/v1/chats/"+chat+"/status", nil)
		var st wire.Status
		if code == 200 && json.Unmarshal(body, &st) == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s: %d %s", chat, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func builtAll(st wire.Status) bool { return st.Entries > 0 && st.Unbuilt == 0 && st.InFlight == 0 }

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func user(blocks ...map[string]any) map[string]any {
	return map[string]any{"role": "user", "content": blocks}
}

// pngBlock is an inline image block of a w x h PNG in c.
func pngBlock(t *testing.T, w, h int, c color.Color) map[string]any {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(c), image.Point{}, draw.Src)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(buf.Bytes())}
}

// chatWithImages logs a chat whose first message carries an image and
// waits until every node is built.
func chatWithImages(t *testing.T, s *server, chat string) {
	t.Helper()
	s.logMessages(t, chat,
		user(text("here is the chart of the quarter"), pngBlock(t, 120, 80, color.RGBA{200, 40, 40, 255})),
		map[string]any{"role": "assistant", "content": []any{text("The chart shows sales rising in March.")}},
		user(text("and the forecast?")),
		map[string]any{"role": "assistant", "content": []any{text("It expects a flat April.")}},
	)
	s.waitStatus(t, chat, builtAll)
}

// artifactDir is where screenshots go: $DURACHAT_ARTIFACTS, else
// .artifacts/ui at the module's root (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DURACHAT_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".artifacts")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the whole page as <name>.png among the artifacts.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(buf, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	p := filepath.Join(artifactDir(t), name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls js in the page until it is true.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s: %v\npage text:\n%s", what, ctx.Err(), body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func chatURL(s *server, chat string) string { return s.url + "/ui/#/chat/" + chat }

// chatTab opens a new tab on the page of a new chat with images (on the
// shared server).
func chatTab(t *testing.T, chat string) (context.Context, *consoleLog, *server) {
	t.Helper()
	ctx, console := tab(t)
	s := sharedServer(t)
	chatWithImages(t, s, chat)
	do(t, ctx, "the chat page", chromedp.Navigate(chatURL(s, chat)))
	return ctx, console, s
}

func TestPagesLoadWithNoConsoleErrors(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := sharedServer(t)
	// A chat with an image and a leaf the compactor keeps failing: the
	// screenshot of this page is the README's.
	chatWithImages(t, s, "load")
	s.logMessages(t, "load", user(text(failMarker+" "+strings.Repeat("a long message the compactor must summarize ", 20))))
	s.waitStatus(t, "load", func(st wire.Status) bool { return st.Retrying > 0 })

	do(t, ctx, "the chat list", chromedp.Navigate(s.url+"/ui"))
	waitFor(t, ctx, "the list to load", `(() => { const s = document.querySelector("main [role=status]"); return !!s && !/Loading/.test(s.textContent); })()`)
	screenshot(t, ctx, "chat-list")

	do(t, ctx, "the chat page", chromedp.Navigate(chatURL(s, "load")))
	waitFor(t, ctx, "the view, the tree and the progress", `document.querySelectorAll("#view button.line").length > 0 &&
		document.querySelectorAll("#tree-nodes li").length > 0 && !!document.querySelector("#build-progress")`)
	waitFor(t, ctx, "the messages section to settle", `!/Loading/.test(document.querySelector("#messages").textContent)`)
	do(t, ctx, "zooming into the image's entry", chromedp.Click(chromedp.CSS(`#view button.line[data-node="0+1"]`)))
	waitFor(t, ctx, "the zoom", `[...document.querySelectorAll("#zoom img.thumb")].some((i) => i.complete && i.naturalWidth > 0) &&
		document.querySelectorAll("#view img.thumb").length > 0`)
	screenshot(t, ctx, "chat")
	console.check(t, s.missingRoutes(t))
}

func TestAChatWithImagesShowsTheirThumbnails(t *testing.T) {
	t.Parallel()
	ctx, console, s := chatTab(t, "images")
	// The tree's leaf names the image; the page fetches it with the token
	// and shows it: a loaded image has a natural size.
	loaded := `[...document.querySelectorAll("%s img.thumb")].some((i) => i.complete && i.naturalWidth === 120 && i.alt.startsWith("image "))`
	waitFor(t, ctx, "a thumbnail in the tree", fmt.Sprintf(loaded, "#tree"))
	waitFor(t, ctx, "a thumbnail in the view", fmt.Sprintf(loaded, "#view"))
	screenshot(t, ctx, "thumbnails")

	// The message log's thumbnails are signed links (GET .../messages
	// with images=links), where the server has that route.
	t.Run("messages", func(t *testing.T) {
		if s.missing(t, "/v1/chats/images/messages") {
			t.Fatal("the server does not serve GET /v1/chats/{chat}/messages")
		}
		waitFor(t, ctx, "a message thumbnail", fmt.Sprintf(loaded, "#messages"))
		src := eval[string](t, ctx, `document.querySelector("#messages img.thumb").src`)
		if strings.HasPrefix(src, "blob:") || strings.HasPrefix(src, "data:") {
			t.Errorf("message thumbnail %q is not a signed link", src)
		}
	})
	console.check(t, s.missingRoutes(t))
}

func TestClickingALineZooms(t *testing.T) {
	t.Parallel()
	ctx, console, s := chatTab(t, "zoom")
	waitFor(t, ctx, "the view", `document.querySelectorAll("#view button.line").length > 0`)

	// The tree's top node covers the 4 entries: clicking its line opens
	// its two halves, and clicking a half opens its leaves.
	do(t, ctx, "clicking the top node's line", chromedp.Click(chromedp.CSS(`#tree-nodes button.line[data-node="0+4"]`)))
	waitFor(t, ctx, "the zoom on 0+4", `document.querySelector("#zoom h2").textContent === "Zoom 0+4" &&
		[...document.querySelectorAll("#zoom button.line")].map((b) => b.dataset.node).join() === "0+2,2+2"`)
	do(t, ctx, "clicking a half", chromedp.Click(chromedp.CSS(`#zoom button.line[data-node="0+2"]`)))
	waitFor(t, ctx, "the zoom on 0+2", `document.querySelector("#zoom h2").textContent === "Zoom 0+2" &&
		[...document.querySelectorAll("#zoom button.line")].map((b) => b.dataset.node).join() === "0+1,1+1"`)

	// The keyboard does what the mouse does: Enter on a focused line.
	do(t, ctx, "Enter on a leaf", chromedp.Focus(chromedp.CSS(`#zoom button.line[data-node="0+1"]`)), chromedp.KeyEvent(kb.Enter))
	waitFor(t, ctx, "the original entry with its image", `document.querySelector("#zoom h2").textContent === "Zoom 0+1" &&
		/chart of the quarter/.test(document.querySelector("#zoom pre").textContent) &&
		[...document.querySelectorAll("#zoom img.thumb")].some((i) => i.complete && i.naturalWidth === 120)`)
	if trail := eval[string](t, ctx, `[...document.querySelectorAll("#zoom .crumbs button")].map((b) => b.textContent).join()`); trail != "0+4,0+2,0+1" {
		t.Errorf("zoom trail %q, want 0+4,0+2,0+1", trail)
	}
	// A line of the view zooms too.
	do(t, ctx, "clicking a view line", chromedp.Click(chromedp.CSS(`#view button.line[data-node="3+1"]`)))
	waitFor(t, ctx, "the zoom from the view", `document.querySelector("#zoom h2").textContent === "Zoom 3+1" &&
		/flat April/.test(document.querySelector("#zoom pre").textContent)`)
	screenshot(t, ctx, "zoom")
	console.check(t, s.missingRoutes(t))
}

func TestARetryingNodeShowsItsErrorAndProgressIsLive(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := sharedServer(t)
	s.logMessages(t, "retry", user(text("first message, summarized at once")))
	s.waitStatus(t, "retry", builtAll)
	do(t, ctx, "the chat page", chromedp.Navigate(chatURL(s, "retry")))
	waitFor(t, ctx, "one entry built", `/Summaries built: 100%/.test(document.querySelector("#progress").textContent)`)

	// Logged while the page is open: the page learns of it by polling,
	// without a reload.
	s.logMessages(t, "retry", user(text(failMarker+" "+strings.Repeat("a long message the compactor must summarize ", 20))))
	s.waitStatus(t, "retry", func(st wire.Status) bool { return st.Retrying > 0 })
	// The leaves are a level below the top one the tree opens on.
	waitFor(t, ctx, "the tree's levels", `[...document.querySelectorAll("#tree .levels button")].some((b) => b.textContent.startsWith("Level 0"))`)
	do(t, ctx, "choosing level 0", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#tree .levels button")].find((b) => b.textContent.startsWith("Level 0")).click()`))
	waitFor(t, ctx, "the tree to show the retrying leaf", `(() => {
		const li = document.querySelector('#tree li[data-status="retrying"]');
		return !!li && li.querySelector("button.line").dataset.node === "1+1" && /overloaded/.test(li.querySelector(".err").textContent) &&
			/1 failure\b/.test(li.querySelector(".err").textContent);
	})()`)
	waitFor(t, ctx, "the progress to show the failure", `/Last error.*overloaded/.test(document.querySelector("#progress").textContent) &&
		/Waiting to retry/.test(document.querySelector("#progress").textContent)`)
	screenshot(t, ctx, "retrying")
	console.check(t, s.missingRoutes(t))
}

func TestPagesAreUsableAtPhoneWidthAndByKeyboard(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := sharedServer(t)
	chatWithImages(t, s, "phone")
	do(t, ctx, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, page := range []struct{ name, url, ready string }{
		{"chat-list-phone", s.url + "/ui/", `!/Loading/.test(document.querySelector("main [role=status]").textContent)`},
		{"chat-phone", chatURL(s, "phone"), `document.querySelectorAll("#tree img.thumb").length > 0 && document.querySelectorAll("#view button.line").length > 0`},
	} {
		do(t, ctx, page.name, chromedp.Navigate(page.url))
		waitFor(t, ctx, page.name, page.ready)
		if w := eval[[]int](t, ctx, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
			t.Errorf("%s: the page is %d px wide in a %d px viewport", page.name, w[0], w[1])
		}
		// Every control has a name a screen reader reads, every image a
		// text alternative.
		unnamed := eval[[]string](t, ctx, `[...document.querySelectorAll("input, select, textarea")].filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).map((e) => e.outerHTML)
			.concat([...document.querySelectorAll("button, a")].filter((e) => !(e.getAttribute("aria-label") || e.textContent.trim())).map((e) => e.outerHTML))
			.concat([...document.querySelectorAll("img")].filter((e) => !e.getAttribute("alt")).map((e) => e.outerHTML))`)
		for _, u := range unnamed {
			t.Errorf("%s: no accessible name: %s", page.name, u)
		}
		screenshot(t, ctx, page.name)
	}

	// Tab reaches the skip link first, then the controls, and the view's
	// lines are in the tab order.
	do(t, ctx, "a fresh load and the first Tab", chromedp.Reload())
	waitFor(t, ctx, "the view", `document.querySelectorAll("#view button.line").length > 0`)
	do(t, ctx, "the first Tab", chromedp.KeyEvent(kb.Tab))
	if got := eval[string](t, ctx, `document.activeElement.textContent`); got != "Skip to content" {
		t.Errorf("the first Tab focuses %q, want the skip link", got)
	}
	reached := false
	for i := 0; i < 40 && !reached; i++ {
		do(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
		reached = eval[bool](t, ctx, `document.activeElement.matches("#view button.line")`)
	}
	if !reached {
		t.Error("Tab never reaches a line of the view")
	}
	do(t, ctx, "Enter", chromedp.KeyEvent(kb.Enter))
	waitFor(t, ctx, "the zoom, focused", `!document.querySelector("#zoom").hidden && document.activeElement === document.querySelector("#zoom h2")`)
	console.check(t, s.missingRoutes(t))
}

func TestTheTokenIsAskedForAndKeptInTheTab(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := startServer(t, map[string]string{"secret-token-0001": "tenant-a"})
	chatWithImages(t, s, "private")
	do(t, ctx, "the chat page", chromedp.Navigate(chatURL(s, "private")))
	waitFor(t, ctx, "the token form", `!document.querySelector("#token-form").hidden && document.activeElement.id === "token-input"`)
	do(t, ctx, "entering the token",
		chromedp.SendKeys(chromedp.ID("token-input"), "secret-token-0001"),
		chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)))
	waitFor(t, ctx, "the chat with the token", `document.querySelectorAll("#view button.line").length > 0 && document.querySelector("#token-form").hidden &&
		[...document.querySelectorAll("#tree img.thumb")].some((i) => i.complete && i.naturalWidth === 120)`)
	if tok := eval[string](t, ctx, `sessionStorage.getItem("durachat.token")`); tok != "secret-token-0001" {
		t.Errorf("session storage holds %q", tok)
	}
	if tok := eval[any](t, ctx, `localStorage.getItem("durachat.token")`); tok != nil {
		t.Errorf("the token leaked into local storage: %v", tok)
	}
	// The browser logs the 401s before the token, and the routes this
	// server lacks; nothing else.
	console.check(t, func(m chromedp.ConsoleMessage) bool {
		return failedLoad(m, http.StatusUnauthorized) || s.missingRoutes(t)(m)
	})
}

func TestTheChatListShowsEveryChat(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := sharedServer(t)
	chatWithImages(t, s, "listed")
	do(t, ctx, "the chat list", chromedp.Navigate(s.url+"/ui/"))
	if s.missing(t, "/v1/chats") {
		t.Fatal("the server does not serve GET /v1/chats")
	}
	waitFor(t, ctx, "the chat in the list", `[...document.querySelectorAll("table.chats a")].some((a) => a.textContent === "listed")`)
	row := eval[string](t, ctx, `[...document.querySelectorAll("table.chats tr")].find((r) => r.querySelector("a")?.textContent === "listed").innerText`)
	if !strings.Contains(row, "4") || !strings.Contains(row, "7 of 7") {
		t.Errorf("the row of chat listed: %q, want 4 messages and 7 of 7 built", row)
	}
	do(t, ctx, "opening the chat", chromedp.Click(chromedp.CSS(`table.chats a[href="#/chat/listed"]`)))
	waitFor(t, ctx, "the chat", `document.querySelectorAll("#view button.line").length > 0`)
	console.check(t, s.missingRoutes(t))
}

// standIn serves the chat list and the message log in the shape their
// routes answer, in front of a real server that may not have them yet: the
// page's rendering of both is tested before they land, and against the
// routes themselves once they do (the tests above). It knows one chat,
// logged by chatWithImages.
func standIn(t *testing.T, s *server, chat string) *httptest.Server {
	t.Helper()
	code, body := s.call(t, "GET", "/v1/chats/"+chat+"/tree?level=0", nil)
	var tree wire.Tree
	if err := json.Unmarshal(body, &tree); code != 200 || err != nil || len(tree.Nodes) == 0 || len(tree.Nodes[0].Images) != 1 {
		t.Fatalf("tree of %s: %d %s", chat, code, body)
	}
	image := tree.Nodes[0].Images[0]
	real, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(real)
	var self string
	h := http.NewServeMux()
	h.Handle("/", proxy)
	h.HandleFunc("GET /v1/chats", func(w http.ResponseWriter, r *http.Request) {
		var st wire.Status
		code, body, err := s.request("GET", "/v1/chats/"+chat+"/status", nil)
		if err == nil && code == 200 {
			err = json.Unmarshal(body, &st)
		}
		if err != nil || code != 200 {
			http.Error(w, fmt.Sprintf("status: %d %v", code, err), http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"chats": []any{map[string]any{
			"chat": chat, "messages": 4, "lastActivity": time.Now().UTC().Format(time.RFC3339),
			"memory": map[string]any{"nodes": st.Nodes, "built": st.Built, "retrying": st.Retrying, "stalled": st.Stalled},
		}}, "next": ""})
	})
	h.HandleFunc("GET /v1/chats/{chat}/messages", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("images") != "links" {
			http.Error(w, "the page must ask for links", http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"messages": []any{
			map[string]any{"seq": 0, "message": user(text("here is the chart of the quarter"),
				map[string]any{"type": "image", "name": image, "mimeType": "image/png", "url": self + "/signed/" + image + "?sig=x"})},
			map[string]any{"seq": 1, "message": map[string]any{"role": "assistant", "content": []any{text("The chart shows sales rising in March.")}}},
		}, "next": ""})
	})
	// The stand-in's signed links: the image, read through the API.
	h.HandleFunc("GET /signed/{name}", func(w http.ResponseWriter, r *http.Request) {
		code, body, err := s.request("GET", "/v1/chats/"+chat+"/images/"+r.PathValue("name"), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	self = srv.URL
	return srv
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestTheListAndTheMessagesFollowTheirContract(t *testing.T) {
	t.Parallel()
	ctx, console := tab(t)
	s := sharedServer(t)
	chatWithImages(t, s, "contract")
	front := standIn(t, s, "contract")

	do(t, ctx, "the chat list", chromedp.Navigate(front.URL+"/ui/"))
	waitFor(t, ctx, "the chat in the list", `[...document.querySelectorAll("table.chats a")].some((a) => a.textContent === "contract")`)
	row := eval[string](t, ctx, `document.querySelector("table.chats tbody tr").innerText`)
	if !strings.Contains(row, "4") || !strings.Contains(row, "7 of 7") {
		t.Errorf("the row: %q, want 4 messages and 7 of 7 built", row)
	}
	screenshot(t, ctx, "chat-list-contract")
	do(t, ctx, "opening the chat", chromedp.Click(chromedp.CSS(`table.chats a[href="#/chat/contract"]`)))
	waitFor(t, ctx, "the messages with a thumbnail from its signed link", `document.querySelectorAll("#messages li").length === 2 &&
		[...document.querySelectorAll("#messages img.thumb")].some((i) => i.complete && i.naturalWidth === 120 && i.src.includes("/signed/"))`)
	if got := eval[string](t, ctx, `document.querySelector("#messages li").innerText`); !strings.Contains(got, "chart of the quarter") {
		t.Errorf("the first message: %q", got)
	}
	console.check(t, s.missingRoutes(t))
}

// A message is erased from its chat page after a confirmation: cancelling
// erases nothing; confirming erases it (the log reads it back as a
// tombstone) and shows its tombstone in its place.
func TestAMessageIsErasedFromItsPageAfterAConfirmation(t *testing.T) {
	t.Parallel()
	ctx, console, s := chatTab(t, "erase")
	first := `document.querySelector("#messages li[data-seq]")`
	waitFor(t, ctx, "the messages", first+` !== null && `+first+`.querySelector("button.erase-ask") !== null`)
	do(t, ctx, "asking to erase the first message", chromedp.Click(chromedp.CSS(`#messages li[data-seq] button.erase-ask`)))
	waitFor(t, ctx, "the confirmation", `document.querySelector("#messages [role=alertdialog] button.erase-confirm") !== null`)
	do(t, ctx, "cancelling", chromedp.Click(chromedp.CSS(`#messages button.erase-cancel`)))
	waitFor(t, ctx, "the erase button back", first+`.querySelector("button.erase-ask") !== null`)
	if _, body := s.call(t, "GET", "/v1/chats/erase/messages", nil); strings.Contains(string(body), `"erased"`) {
		t.Fatalf("a cancelled erasure erased: %s", body)
	}
	do(t, ctx, "asking again", chromedp.Click(chromedp.CSS(`#messages li[data-seq] button.erase-ask`)))
	do(t, ctx, "confirming", chromedp.Click(chromedp.CSS(`#messages button.erase-confirm`)))
	waitFor(t, ctx, "the tombstone", first+`.classList.contains("erased") && /\(erased .+\)/.test(`+first+`.innerText)`)
	screenshot(t, ctx, "erased-message")
	code, body := s.call(t, "GET", "/v1/chats/erase/messages", nil)
	var page struct {
		Messages []struct {
			Erased string `json:"erased"`
		} `json:"messages"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Messages) != 4 || page.Messages[0].Erased == "" ||
		strings.Contains(string(body), "chart of the quarter") {
		t.Fatalf("the log after the erasure: %d %s", code, body)
	}
	console.check(t, s.missingRoutes(t))
}
