package client_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/durachat/durachat/client"
)

// noisyShot is a PNG of about 1 MB (noise barely compresses), distinct for
// each seed.
func noisyShot(t *testing.T, seed uint64) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 580, 580))
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A Go host's loop over eight turns of a tool that takes a 1 MB
// screenshot each turn: the screenshot just taken is the image the model
// gets back every turn, older ones stay refs within the default budget,
// and the answer lists what it left out.
func TestEveryTurnTheModelSeesTheScreenshotItJustAskedFor(t *testing.T) {
	ctx, chat := testCtx(t), chatFor(t)
	context := client.PiContext{SystemPrompt: "You test web pages.", Messages: []client.Message{client.UserText("Watch the page.")}}
	var names []string
	for turn := range 8 {
		callID := fmt.Sprintf("shot-%d", turn)
		context.Messages = append(context.Messages, client.AssistantMessage(client.ToolCall(callID, "screenshot", []byte(`{}`))))
		shot := noisyShot(t, uint64(turn))
		r, err := chat.AfterTool(ctx, client.AfterToolInput{Call: client.Call{ID: callID, Name: "screenshot"},
			Result: client.ToolResult{Content: client.Content{client.Text("the page"), client.Image(shot, "image/png")}}})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, r.Stored...)
		context.Messages = append(context.Messages, client.ToolResultMessage(callID, "screenshot", r.Result))

		b, err := chat.BeforeRequest(ctx, client.BeforeRequestInput{Format: client.FormatPi, Request: context})
		if err != nil {
			t.Fatal(err)
		}
		var sent client.PiContext
		if err := b.Decode(&sent); err != nil {
			t.Fatal(err)
		}
		last := sent.Messages[len(sent.Messages)-1].Content
		if len(last) != 2 || last[1].Type != "image" || last[1].Data != base64.StdEncoding.EncodeToString(shot) {
			t.Fatalf("turn %d: the model was not sent the screenshot just taken; restored %v unrestored %v", turn, b.Restored, b.Unrestored)
		}
		// What is left out is listed, oldest first, and each is its ref.
		var left []string
		for _, u := range b.Unrestored {
			if u.Reason != "budget" {
				t.Fatalf("turn %d: %s left out for %q, want budget", turn, u.Name, u.Reason)
			}
			left = append(left, u.Name)
		}
		if want := names[:len(names)-len(b.Restored)]; !slices.Equal(left, want) || !slices.Equal(b.Restored, names[len(want):]) {
			t.Fatalf("turn %d: restored %v unrestored %v; want the newest restored and %v left out", turn, b.Restored, left, want)
		}
		k := 0
		for _, m := range sent.Messages {
			if m.Role != "toolResult" {
				continue
			}
			b, restored := m.Content[1], slices.Contains(b.Restored, names[k])
			if n, isRef := client.RefName(b); restored && (b.Type != "image" || b.Name != names[k]) || !restored && n != names[k] || isRef == restored {
				t.Fatalf("turn %d: screenshot %d is sent as %+v", turn, k, b.Type)
			}
			k++
		}
		if turn == 7 && len(b.Unrestored) == 0 {
			t.Fatal("eight 1 MB screenshots all fit the default budget: the test proves nothing")
		}
		context.Messages = append(context.Messages, client.AssistantMessage(client.Text(fmt.Sprintf("seen %d", turn))))
	}
}
