package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
	"time"

	"github.com/durachat/durachat/client"
)

// screenshot is a small PNG, as a screenshot tool would return.
func screenshot(c color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for x := 0; x < 8; x++ {
		for y := 0; y < 6; y++ {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("DURACHAT_URL")) // e.g. http://127.0.0.1:8080
	if err != nil {
		log.Fatal(err)
	}
	chat := c.Chat("example-turn")

	// 1. Log the user's message; the receipt makes a retry safe.
	if _, err := chat.Append(ctx, "turn-1-user", client.UserText("Why does the login page fail?")); err != nil {
		log.Fatal(err)
	}
	// 2. The memory view for the system prompt, and the memory tools.
	view, err := chat.View(ctx, client.WaitTurn)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := chat.Tools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(view.View)
	for _, t := range tools {
		fmt.Println("tool:", t.Name)
	}
	// 3. A tool returns a screenshot: its image becomes a ref before it is kept.
	shot, err := chat.AfterTool(ctx, client.AfterToolInput{
		Call:   client.Call{ID: "call-1", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.Text("Captured the login page."), client.Image(screenshot(color.White), "image/png")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(shot.Result.Content.Text() == "Captured the login page.\n[image "+shot.Stored[0]+"]")
	// 4. Just before the model call, the refs become images again.
	req := map[string]any{"model": "claude-x", "max_tokens": 1024, "messages": []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "[image " + shot.Stored[0] + "]"}}},
	}}
	restored, err := chat.BeforeRequest(ctx, client.BeforeRequestInput{Format: client.FormatAnthropic, Request: req})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("restored:", len(restored.Restored), "unrestored:", len(restored.Unrestored))
	// Output:
	// <chat>
	// 0+1|user: Why does the login page fail?
	// </chat>
	// tool: zoom
	// tool: date
	// true
	// restored: 1 unrestored: 0
}

func ExampleChat_Append() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("DURACHAT_URL"))
	if err != nil {
		log.Fatal(err)
	}
	chat := c.Chat("example-append")
	msgs := []any{
		client.UserText("Open the settings page."),
		client.AssistantMessage(client.Text("Opening it now.")),
	}
	ids, err := chat.Append(ctx, "turn-1", msgs...)
	if err != nil {
		log.Fatal(err)
	}
	again, err := chat.Append(ctx, "turn-1", msgs...) // a retry: nothing is logged twice
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids, again)
	// Output: [0 1] [0 1]
}

func ExampleChat_Zoom() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("DURACHAT_URL"))
	if err != nil {
		log.Fatal(err)
	}
	chat := c.Chat("example-zoom")
	kept, err := chat.AfterTool(ctx, client.AfterToolInput{
		Call:   client.Call{ID: "call-1", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.Image(screenshot(color.Black), "image/png")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{})
	_, err = chat.Append(ctx, "turn-1",
		client.AssistantMessage(client.ToolCall("call-1", "screenshot", args)),
		client.ToolResultMessage("call-1", "screenshot", kept.Result))
	if err != nil {
		log.Fatal(err)
	}
	// Entry 1 is the tool result: zoom gives it back with its image.
	page, err := chat.Zoom(ctx, client.ZoomArgs{ID: 1})
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range page.Content {
		if b.Type == "image" {
			fmt.Println(b.MimeType, b.Name == kept.Stored[0])
		}
	}
	// Output: image/png true
}

func ExampleError() {
	c, err := client.New(os.Getenv("DURACHAT_URL"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Chat("not/a/chat").View(context.Background(), client.NoWait)
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code, apiErr.Field)
	}
	// Output: 400 bad_request chat
}

// An image too large for a request is uploaded first (straight to S3 in
// AWS) and sent as its ref block. The hooks and Append do this by
// themselves past the client's body limit (WithBodyLimit).
func ExampleChat_Upload() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("DURACHAT_URL"))
	if err != nil {
		log.Fatal(err)
	}
	chat := c.Chat("example-upload")
	shot := screenshot(color.RGBA{R: 200, A: 255})
	name, err := chat.Upload(ctx, shot)
	if err != nil {
		log.Fatal(err)
	}
	r, err := chat.AfterTool(ctx, client.AfterToolInput{
		Call:   client.Call{ID: "call-1", Name: "screenshot"},
		Result: client.ToolResult{Content: client.Content{client.RefBlock(name)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Result.Content.Refs()[0] == name)
	again, err := chat.UploadTarget(ctx, client.Describe(shot))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", again.Stored)
	// Output:
	// true
	// stored: true
}
