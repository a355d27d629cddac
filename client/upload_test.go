package client_test

import (
	"bytes"
	"image/color"
	"net/http"
	"testing"

	"github.com/durachat/durachat/client"
)

func TestUploadStoresTheImageUnderItsInlineNameOnceARefClaimsIt(t *testing.T) {
	chat := chatFor(t)
	ctx := testCtx(t)
	shot := screenshot(color.RGBA{R: 10, G: 200, B: 30, A: 255})
	name, err := chat.Upload(ctx, shot)
	if err != nil {
		t.Fatal(err)
	}
	if want := client.Describe(shot).Name; name != want {
		t.Fatalf("uploaded as %s, want %s", name, want)
	}
	r, err := chat.AfterTool(ctx, client.AfterToolInput{
		Call:   client.Call{ID: "c", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.RefBlock(name)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs := r.Result.Content.Refs(); len(refs) != 1 || refs[0] != name {
		t.Fatalf("result refs %v", refs)
	}
	data, _, err := chat.Image(ctx, name)
	if err != nil || !bytes.Equal(data, shot) {
		t.Fatalf("image: %v (%d bytes)", err, len(data))
	}
	// The same image inline gets the same name.
	if inline := storeShot(t, chat, color.RGBA{R: 10, G: 200, B: 30, A: 255}); inline != name {
		t.Fatalf("inline name %s, uploaded %s", inline, name)
	}
	a, err := chat.UploadTarget(ctx, client.Describe(shot))
	if err != nil || !a.Stored || a.Upload != nil {
		t.Fatalf("asked again: %+v, %v; want stored", a, err)
	}
}

func TestUploadTargetRefusesTooLargeNamingTheSize(t *testing.T) {
	in := client.Describe(screenshot(color.Black))
	in.Size = 1 << 30
	_, err := chatFor(t).UploadTarget(testCtx(t), in)
	if e := asAPIError(t, err); e.Status != http.StatusRequestEntityTooLarge || e.Code != client.CodeTooLarge || e.Field != "size" {
		t.Fatalf("err = %v", err)
	}
}

func TestUploadOfBytesThatAreNotAnImageIsABadRequest(t *testing.T) {
	_, err := chatFor(t).Upload(testCtx(t), bytes.Repeat([]byte("plain text "), 50))
	if e := asAPIError(t, err); e.Status != http.StatusBadRequest {
		t.Fatalf("err = %v", err)
	}
}

func TestRefToAnImageNeverUploadedIsABadRequestNamingTheBlock(t *testing.T) {
	in := client.Describe(screenshot(color.White))
	_, err := chatFor(t).AfterTool(testCtx(t), client.AfterToolInput{
		Call:   client.Call{ID: "c", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.Text("x"), client.RefBlock(in.Name)}},
	})
	if e := asAPIError(t, err); e.Status != http.StatusBadRequest || e.Field != "result.content[1]" {
		t.Fatalf("err = %v", err)
	}
}

// Past the body limit the client uploads the images and sends refs; the
// caller's values are left as they were.
func TestBodiesPastTheLimitUploadTheirImages(t *testing.T) {
	c, err := client.New(serverURL, client.WithBodyLimit(200))
	if err != nil {
		t.Fatal(err)
	}
	chat := c.Chat("past-the-limit")
	ctx := testCtx(t)
	shot := screenshot(color.RGBA{R: 1, G: 2, B: 3, A: 255})
	name := client.Describe(shot).Name
	content := client.Content{client.Text("took it"), client.Image(shot, "image/png")}

	r, err := chat.AfterTool(ctx, client.AfterToolInput{Call: client.Call{ID: "c", Name: "screenshot"}, Result: client.ToolResult{Content: content}})
	if err != nil {
		t.Fatal(err)
	}
	if refs := r.Result.Content.Refs(); len(refs) != 1 || refs[0] != name || len(r.Stored) != 1 || r.Stored[0] != name {
		t.Fatalf("refs %v stored %v, want [%s]", refs, r.Stored, name)
	}
	if content[1].Type != "image" {
		t.Fatal("the caller's content was changed")
	}

	shot2 := screenshot(color.RGBA{R: 4, G: 5, B: 6, A: 255})
	in, err := chat.OffloadInput(ctx, client.Message{Role: "user", Content: client.Content{client.Image(shot2, "image/png")}})
	if err != nil || len(in.Stored) != 1 || in.Stored[0] != client.Describe(shot2).Name {
		t.Fatalf("offload-input: %+v, %v", in, err)
	}

	shot3 := screenshot(color.RGBA{R: 7, G: 8, B: 9, A: 255})
	msg := client.Message{Role: "user", Content: client.Content{client.Text("see"), client.Image(shot3, "image/png")}}
	if _, err := chat.Append(ctx, "r1", msg); err != nil {
		t.Fatal(err)
	}
	if data, _, err := chat.Image(ctx, client.Describe(shot3).Name); err != nil || !bytes.Equal(data, shot3) {
		t.Fatalf("appended image: %v", err)
	}
	if msg.Content[1].Type != "image" {
		t.Fatal("the caller's message was changed")
	}
}
