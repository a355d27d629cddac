package client_test

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
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/client"
)

var notInChatID = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chatFor is a chat of its own for each test.
func chatFor(t *testing.T) *client.Chat {
	t.Helper()
	id := notInChatID.ReplaceAllString(t.Name(), "_")
	if len(id) > 128 {
		id = id[len(id)-128:]
	}
	return newClient(t).Chat(id)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func asAPIError(t *testing.T, err error) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a *client.Error", err, err)
	}
	return e
}

// storeShot stores a screenshot through after-tool and returns its name.
func storeShot(t *testing.T, chat *client.Chat, c color.Color) string {
	t.Helper()
	r, err := chat.AfterTool(testCtx(t), client.AfterToolInput{
		Call:   client.Call{ID: "shot", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.Image(screenshot(c), "image/png")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stored) != 1 {
		t.Fatalf("stored = %v, want one name", r.Stored)
	}
	return r.Stored[0]
}

func TestNewRefusesABaseURLThatIsNotHTTP(t *testing.T) {
	for _, base := range []string{"", "localhost:8080", "ftp://host", "http://"} {
		if _, err := client.New(base); err == nil {
			t.Errorf("New(%q) = nil error, want one", base)
		}
	}
}

func TestHealthIsNilWhenTheStoresAnswer(t *testing.T) {
	if err := newClient(t).Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestAppendWithTheSameReceiptLogsNothingTwice(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	msg := client.UserText("hello")
	first, err := chat.Append(ctx, "r1", msg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := chat.Append(ctx, "r1", msg)
	if err != nil {
		t.Fatal(err)
	}
	next, err := chat.Append(ctx, "", client.UserText("next"))
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0] != 0 || again[0] != 0 || next[0] != 1 {
		t.Fatalf("ids = %v, %v, %v; want [0] [0] [1]", first, again, next)
	}
}

func TestAppendReusingAReceiptForOtherMessagesIsAConflictNamingTheReceipt(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "r1", client.UserText("one")); err != nil {
		t.Fatal(err)
	}
	_, err := chat.Append(ctx, "r1", client.UserText("two"))
	e := asAPIError(t, err)
	if e.Status != http.StatusConflict || e.Code != client.CodeConflict || e.Field != "receipt" {
		t.Fatalf("err = %+v, want 409 conflict on receipt", e)
	}
}

func TestAppendTakesAnyValueThatEncodesToAMessage(t *testing.T) {
	chat := chatFor(t)
	raw := json.RawMessage(`{"role":"user","content":"raw JSON","timestamp":1700000000000}`)
	m := map[string]any{"role": "user", "content": "a map", "kind": "note"}
	ids, err := chat.Append(testCtx(t), "", raw, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("ids = %v, want two", ids)
	}
}

func TestAppendOfAnInvalidMessageIsABadRequestNamingTheField(t *testing.T) {
	_, err := chatFor(t).Append(testCtx(t), "", map[string]any{"role": "robot", "content": "x"})
	e := asAPIError(t, err)
	if e.Code != client.CodeBadRequest || !strings.HasPrefix(e.Field, "messages[0]") {
		t.Fatalf("err = %+v, want bad_request on messages[0]...", e)
	}
}

func TestViewWithWaitTurnHasTheLoggedLines(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "", client.UserText("first"), client.AssistantMessage(client.Text("second"))); err != nil {
		t.Fatal(err)
	}
	v, err := chat.View(ctx, client.WaitTurn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.View, "<chat>") || !strings.Contains(v.View, "first") || v.Lines == 0 || v.Unbuilt != 0 {
		t.Fatalf("view = %+v, want both lines built", v)
	}
	now, err := chat.View(ctx, client.NoWait)
	if err != nil {
		t.Fatal(err)
	}
	if now.View != v.View {
		t.Fatalf("view without wait = %q, want %q", now.View, v.View)
	}
}

func TestToolsOfferSearchOnlyWhenItIsOn(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	names := func() string {
		tools, err := chat.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tool := range tools {
			if len(tool.Parameters) == 0 || tool.Description == "" {
				t.Errorf("tool %s has no description or parameters", tool.Name)
			}
			n = append(n, tool.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "zoom,date" {
		t.Fatalf("tools = %s, want zoom,date", got)
	}
	s, err := chat.SetMemorySettings(ctx, client.MemorySettings{Search: true})
	if err != nil || !s.Search {
		t.Fatalf("SetMemorySettings = %+v, %v", s, err)
	}
	if got := names(); got != "zoom,date,search" {
		t.Fatalf("tools = %s, want zoom,date,search", got)
	}
}

func TestSearchOffIsAToolErrorForTheModelNotAnError(t *testing.T) {
	r, err := chatFor(t).Search(testCtx(t), client.SearchArgs{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(r.Content.Text(), "memory/settings") {
		t.Fatalf("result = %+v, want a tool error saying how to turn search on", r)
	}
}

func TestSearchFindsALoggedEntry(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.SetMemorySettings(ctx, client.MemorySettings{Search: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Append(ctx, "", client.UserText("the zebra crossing")); err != nil {
		t.Fatal(err)
	}
	r, err := chat.Search(ctx, client.SearchArgs{Text: "zebra"})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || !strings.Contains(r.Content.Text(), "zebra") {
		t.Fatalf("result = %+v, want the entry", r)
	}
}

func TestDateTellsWhenAnEntryWasLogged(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "", client.UserText("now")); err != nil {
		t.Fatal(err)
	}
	r, err := chat.Date(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || !strings.Contains(r.Content.Text(), time.Now().UTC().Format("2006")) {
		t.Fatalf("result = %+v, want a date", r)
	}
}

func TestZoomGivesBackALoggedImageUnderItsName(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	name := storeShot(t, chat, color.RGBA{R: 200, A: 255})
	result := client.ToolResult{Content: client.Content{client.Text("shot"), client.Text("[image " + name + "]")}}
	if _, err := chat.Append(ctx, "", client.ToolResultMessage("c1", "screenshot", result)); err != nil {
		t.Fatal(err)
	}
	r, err := chat.Zoom(ctx, client.ZoomArgs{ID: 0, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, b := range r.Content {
		found = found || b.Type == "image" && b.Name == name
	}
	if !found {
		t.Fatalf("zoom = %+v, want the image %s", r, name)
	}
}

func TestCallToolPassesTheModelsArguments(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "", client.UserText("word for word")); err != nil {
		t.Fatal(err)
	}
	r, err := chat.CallTool(ctx, client.ToolZoom, json.RawMessage(`{"id": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Content.Text(), "word for word") {
		t.Fatalf("zoom = %q, want the entry", r.Content.Text())
	}
}

func TestCallToolOfAnUnknownToolIsNotFound(t *testing.T) {
	_, err := chatFor(t).CallTool(testCtx(t), "frobnicate", nil)
	if e := asAPIError(t, err); e.Status != http.StatusNotFound || e.Code != client.CodeNotFound {
		t.Fatalf("err = %+v, want 404 not_found", e)
	}
}

func TestAfterTool(t *testing.T) {
	shot := client.Image(screenshot(color.RGBA{G: 100, A: 255}), "image/png")
	tests := []struct {
		name        string
		call        client.Call
		bounds      *client.Bounds
		wantSkipped string
		wantRefs    int
	}{
		{name: "images of a model's call become refs", call: client.Call{ID: "c", Name: "screenshot"}, wantRefs: 1},
		{name: "a nested call passes untouched", call: client.Call{ID: "c", Name: "screenshot", Nested: true}, wantSkipped: "nested"},
		{name: "a result whose refs could pass over the bound keeps its images", call: client.Call{ID: "c", Name: "screenshot"},
			bounds: &client.Bounds{MaxBytes: 20}, wantSkipped: "bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := client.AfterToolInput{Call: tt.call, Bounds: tt.bounds, Result: client.ToolResult{
				Content: client.Content{client.Text("the page"), shot},
				Details: json.RawMessage(`{"path":"shot.png"}`),
			}}
			r, err := chatFor(t).AfterTool(testCtx(t), in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Skipped != tt.wantSkipped || len(r.Result.Content.Refs()) != tt.wantRefs || len(r.Stored) != tt.wantRefs {
				t.Fatalf("after-tool = %+v, want skipped %q and %d refs", r, tt.wantSkipped, tt.wantRefs)
			}
			if string(r.Result.Details) != `{"path":"shot.png"}` {
				t.Fatalf("details = %s, want them passed through", r.Result.Details)
			}
		})
	}
}

func TestAfterToolRefusesAnImageThatIsNotOneAndNamesTheField(t *testing.T) {
	bmp := client.Image([]byte("BM not really"), "image/png")
	_, err := chatFor(t).AfterTool(testCtx(t), client.AfterToolInput{
		Call: client.Call{ID: "c", Name: "x"}, Result: client.ToolResult{Content: client.Content{bmp}},
	})
	if e := asAPIError(t, err); e.Code != client.CodeBadRequest || e.Field != "result.content[0].data" {
		t.Fatalf("err = %+v, want bad_request on result.content[0].data", e)
	}
}

func TestOffloadInputTurnsAUsersImagesIntoRefs(t *testing.T) {
	msg := client.UserText("what is this?")
	msg.Content = append(msg.Content, client.Image(screenshot(color.RGBA{B: 100, A: 255}), "image/png"))
	r, err := chatFor(t).OffloadInput(testCtx(t), msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stored) != 1 || r.Message.Content.Refs()[0] != r.Stored[0] || r.Message.Timestamp != msg.Timestamp {
		t.Fatalf("offload-input = %+v, want the image as a ref", r)
	}
}

func TestBeforeRequestRestoresARefInEachFormat(t *testing.T) {
	chat := chatFor(t)
	name := storeShot(t, chat, color.RGBA{R: 10, G: 20, B: 30, A: 255})
	ref := "[image " + name + "]"
	tests := []struct {
		format  client.Format
		request any
		image   string // a string in the restored request that only an image has
	}{
		{client.FormatPi, client.PiContext{SystemPrompt: "s", Messages: []client.Message{client.UserText(ref)}}, `"type":"image"`},
		{client.FormatAnthropic, map[string]any{"model": "m", "max_tokens": 10, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": ref}}}}}, `"media_type":"image/png"`},
		{client.FormatBedrock, map[string]any{"modelId": "m", "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"text": ref}}}}}, `"format":"png"`},
		{client.FormatOpenAI, json.RawMessage(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + ref + `"}]}]}`), `"image_url"`},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			r, err := chat.BeforeRequest(testCtx(t), client.BeforeRequestInput{Format: tt.format, Request: tt.request})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Restored) != 1 || r.Restored[0] != name || len(r.Unrestored) != 0 || r.Images != 1 {
				t.Fatalf("before-request = %+v, want %s restored", r, name)
			}
			if !bytes.Contains(r.Request, []byte(tt.image)) {
				t.Fatalf("request = %s, want an image (%s)", r.Request, tt.image)
			}
		})
	}
}

func TestBeforeRequestResultDecodesIntoAPiContext(t *testing.T) {
	chat := chatFor(t)
	name := storeShot(t, chat, color.Gray{Y: 77})
	r, err := chat.BeforeRequest(testCtx(t), client.BeforeRequestInput{Format: client.FormatPi,
		Request: client.PiContext{Messages: []client.Message{client.UserText("[image " + name + "]"), client.UserText("[image 0000000000000000]")}}})
	if err != nil {
		t.Fatal(err)
	}
	var pc client.PiContext
	if err := r.Decode(&pc); err != nil {
		t.Fatal(err)
	}
	img := pc.Messages[0].Content[0]
	data, _ := base64.StdEncoding.DecodeString(img.Data)
	if img.Type != "image" || img.Name != name || !bytes.Equal(data, screenshot(color.Gray{Y: 77})) {
		t.Fatalf("restored block = %+v, want the image %s", img, name)
	}
	if len(r.Unrestored) != 1 || r.Unrestored[0].Reason != "not_found" {
		t.Fatalf("unrestored = %+v, want the unknown ref not_found", r.Unrestored)
	}
}

func TestBeforeRequestOfAnUnknownFormatIsABadRequest(t *testing.T) {
	_, err := chatFor(t).BeforeRequest(testCtx(t), client.BeforeRequestInput{Format: "gemini", Request: map[string]any{}})
	if e := asAPIError(t, err); e.Code != client.CodeBadRequest || e.Field != "format" {
		t.Fatalf("err = %+v, want bad_request on format", e)
	}
}

func TestImageReadsTheStoredBytes(t *testing.T) {
	chat := chatFor(t)
	name := storeShot(t, chat, color.RGBA{R: 1, G: 2, B: 3, A: 255})
	data, ctype, err := chat.Image(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "image/png" || !bytes.Equal(data, screenshot(color.RGBA{R: 1, G: 2, B: 3, A: 255})) {
		t.Fatalf("image = %d bytes of %s, want the PNG", len(data), ctype)
	}
	_, _, err = chat.Image(testCtx(t), "0000000000000000")
	if e := asAPIError(t, err); e.Status != http.StatusNotFound {
		t.Fatalf("err = %+v, want 404", e)
	}
}

func TestStatusCountsTheEntries(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "", client.UserText("a"), client.UserText("b")); err != nil {
		t.Fatal(err)
	}
	s, err := chat.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entries != 2 || s.Stalled {
		t.Fatalf("status = %+v, want 2 entries", s)
	}
}

func TestTreeShowsEachLevelAndPagesItsNodes(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	if _, err := chat.Append(ctx, "", client.UserText("a"), client.UserText("b"), client.UserText("c")); err != nil {
		t.Fatal(err)
	}
	top, err := chat.Tree(ctx, client.TreePage{})
	if err != nil {
		t.Fatal(err)
	}
	if top.Entries != 3 || len(top.Levels) != 2 || top.Level != 1 || len(top.Nodes) != 1 || top.Nodes[0].Node != "0+2" {
		t.Fatalf("top of the tree = %+v", top)
	}
	level := 0
	page, err := chat.Tree(ctx, client.TreePage{Level: &level, From: 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Nodes) != 1 || page.Nodes[0].Node != "1+1" || page.Next == nil || *page.Next != 2 {
		t.Fatalf("page = %+v", page)
	}
	level = 5
	if _, err := chat.Tree(ctx, client.TreePage{Level: &level}); asAPIError(t, err).Field != "level" {
		t.Fatalf("a level past the top: %v", err)
	}
}

func TestSetMemorySettingsTurnsSearchOffAgain(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	for _, on := range []bool{true, false} {
		s, err := chat.SetMemorySettings(ctx, client.MemorySettings{Search: on})
		if err != nil || s.Search != on {
			t.Fatalf("SetMemorySettings(%v) = %+v, %v", on, s, err)
		}
		st, err := chat.Status(ctx)
		if err != nil || st.Search != on {
			t.Fatalf("status search = %+v, %v; want %v", st, err, on)
		}
	}
}

func TestAContextDeadlineEndsTheCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := chatFor(t).View(ctx, client.WaitTurn)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// A zoom gives an image back under its stored name, so a host that logs
// the zoom's result again (through after-tool, as every tool result goes)
// stores nothing new, even for an image stored shrunk, whose bytes no
// longer hash to its name.
func TestTenZoomsOfAShrunkImageLoggedBackStoreItOnce(t *testing.T) {
	ctx, chat := testCtx(t), chatFor(t)
	// Wider than the longest side kept, so it is stored shrunk.
	wide := image.NewRGBA(image.Rect(0, 0, 2400, 40))
	for x := range 2400 {
		for y := range 40 {
			wide.Set(x, y, color.RGBA{uint8(x), uint8(y * 5), 90, 255})
		}
	}
	var png8 bytes.Buffer
	if err := png.Encode(&png8, wide); err != nil {
		t.Fatal(err)
	}
	first, err := chat.AfterTool(ctx, client.AfterToolInput{Call: client.Call{ID: "shot", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.Image(png8.Bytes(), "image/png")}}})
	if err != nil || len(first.Stored) != 1 {
		t.Fatalf("after-tool = %+v, %v; want one image stored", first, err)
	}
	name := first.Stored[0]
	if _, err := chat.Append(ctx, "shot", client.ToolResultMessage("shot", "screenshot", first.Result)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		z, err := chat.Zoom(ctx, client.ZoomArgs{ID: 0, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		call := client.Call{ID: fmt.Sprintf("zoom-%d", i), Name: "zoom"}
		r, err := chat.AfterTool(ctx, client.AfterToolInput{Call: call, Result: *z})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Stored, []string{name}) {
			t.Fatalf("zoom %d logged back as refs %v, want only %s", i, r.Stored, name)
		}
		if _, err := chat.Append(ctx, call.ID, client.ToolResultMessage(call.ID, call.Name, r.Result)); err != nil {
			t.Fatal(err)
		}
	}
	var export bytes.Buffer
	if err := chat.Export(ctx, &export); err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, line := range strings.Split(export.String(), "\n") {
		var l struct{ Image *struct{ Name string } }
		if err := json.Unmarshal([]byte(line), &l); err == nil && l.Image != nil {
			stored = append(stored, l.Image.Name)
		}
	}
	if !slices.Equal(stored, []string{name}) {
		t.Fatalf("the chat names the images %v, want the one stored image %s", stored, name)
	}
}
