// Command screenshot-agent is a small durachat host: an agent loop with one
// tool of its own, screenshot, against any Anthropic-compatible Messages
// endpoint, that keeps its memory in durachat.
//
//	DURACHAT_URL=http://127.0.0.1:8080 ANTHROPIC_API_KEY=... \
//	  go run ./examples/screenshot-agent "Take a screenshot and describe it."
//
// Each turn it logs the user's message, reads the memory view (into the
// system prompt) and the memory tools, and then loops: the request goes
// through before-request (refs become images), the model answers, the
// assistant message is logged, and each tool result goes through
// after-tool (images become refs) before it is kept and logged. The
// memory tools (zoom, date, search) are answered by durachat.
//
// Configuration (environment):
//
//	DURACHAT_URL        the durachat server (default http://127.0.0.1:8080)
//	DURACHAT_TOKEN      its bearer token (none locally)
//	DURACHAT_CHAT       the chat id (default screenshot-agent)
//	ANTHROPIC_BASE_URL  the Messages endpoint (default Anthropic's)
//	ANTHROPIC_API_KEY   its key (a local compatible server needs none)
//	ANTHROPIC_MODEL     the model (default claude-sonnet-4-5)
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/durachat/durachat/client"
)

const (
	maxSteps  = 8
	maxTokens = 2048
	system    = "You are a helpful agent. You can take screenshots of the screen. " +
		"Your memory of this chat is below; zoom into a line to read it word for word."
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "screenshot-agent:", err)
		os.Exit(1)
	}
}

// run answers one user prompt (the arguments, joined) and prints the
// model's final text.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	prompt := strings.Join(args, " ")
	if prompt == "" {
		return errors.New(`usage: screenshot-agent "<prompt>"`)
	}
	dc, err := client.New(or(getenv("DURACHAT_URL"), "http://127.0.0.1:8080"), client.WithToken(getenv("DURACHAT_TOKEN")))
	if err != nil {
		return err
	}
	a := &agent{
		chat:  dc.Chat(or(getenv("DURACHAT_CHAT"), "screenshot-agent")),
		model: sdk.NewClient(anthropicOptions(getenv)...),
		name:  or(getenv("ANTHROPIC_MODEL"), "claude-sonnet-4-5"),
		run:   newRunID(),
	}
	answer, err := a.turn(ctx, prompt)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, answer)
	return err
}

func anthropicOptions(getenv func(string) string) []option.RequestOption {
	opts := []option.RequestOption{option.WithAPIKey(or(getenv("ANTHROPIC_API_KEY"), "none"))}
	if base := getenv("ANTHROPIC_BASE_URL"); base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	return opts
}

// agent is one chat's loop.
type agent struct {
	chat  *client.Chat
	model sdk.Client
	name  string
	// run makes this run's receipts unique in the chat, so a retried
	// append is logged once and another run's is not taken for it.
	run string
	// history is this turn's messages as the model sees them, refs and all.
	history []sdk.MessageParam
	step    int
}

// receipt names one append of this run.
func (a *agent) receipt(what string) string { return fmt.Sprintf("%s-%d-%s", a.run, a.step, what) }

// turn answers one prompt.
func (a *agent) turn(ctx context.Context, prompt string) (string, error) {
	if _, err := a.chat.Append(ctx, a.receipt("user"), client.UserText(prompt)); err != nil {
		return "", fmt.Errorf("logging the prompt: %w", err)
	}
	view, err := a.chat.View(ctx, client.WaitTurn)
	if err != nil {
		return "", fmt.Errorf("reading the memory view: %w", err)
	}
	memTools, err := a.chat.Tools(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the memory tools: %w", err)
	}
	tools := []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{
		Name:        "screenshot",
		Description: sdk.String("Take a screenshot of the screen."),
		InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{}},
	}}}
	for _, t := range memTools {
		tools = append(tools, toolParam(t))
	}
	a.history = append(a.history, sdk.NewUserMessage(sdk.NewTextBlock(prompt)))

	for a.step = 1; a.step <= maxSteps; a.step++ {
		params := sdk.MessageNewParams{
			Model:     sdk.Model(a.name),
			MaxTokens: maxTokens,
			System:    []sdk.TextBlockParam{{Text: system + "\n\n" + view.View}},
			Messages:  a.history,
			Tools:     tools,
		}
		msg, err := a.send(ctx, params)
		if err != nil {
			return "", err
		}
		a.history = append(a.history, msg.ToParam())
		if _, err := a.chat.Append(ctx, a.receipt("assistant"), assistantMessage(msg)); err != nil {
			return "", fmt.Errorf("logging the answer: %w", err)
		}
		var results []sdk.ContentBlockParamUnion
		for _, block := range msg.Content {
			if block.Type != "tool_use" {
				continue
			}
			kept, err := a.runTool(ctx, block.ID, block.Name, block.Input)
			if err != nil {
				return "", fmt.Errorf("tool %s: %w", block.Name, err)
			}
			results = append(results, toolResultBlock(block.ID, kept))
		}
		if len(results) == 0 {
			return textOf(msg), nil
		}
		a.history = append(a.history, sdk.NewUserMessage(results...))
	}
	return "", fmt.Errorf("no answer within %d steps", maxSteps)
}

// send restores the images of the request's refs and calls the model.
func (a *agent) send(ctx context.Context, params sdk.MessageNewParams) (*sdk.Message, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	restored, err := a.chat.BeforeRequest(ctx, client.BeforeRequestInput{Format: client.FormatAnthropic, Request: json.RawMessage(body)})
	if err != nil {
		return nil, fmt.Errorf("restoring images: %w", err)
	}
	// The restored body replaces the params' own encoding.
	msg, err := a.model.Messages.New(ctx, params, option.WithRequestBody("application/json", []byte(restored.Request)))
	if err != nil {
		return nil, fmt.Errorf("calling the model: %w", err)
	}
	return msg, nil
}

// runTool runs a call and returns its result as it is kept: after
// after-tool, with refs for images. The result is logged.
func (a *agent) runTool(ctx context.Context, id, name string, input json.RawMessage) (client.ToolResult, error) {
	var result client.ToolResult
	switch name {
	case "screenshot":
		shot, err := screenshot()
		if err != nil {
			return result, err
		}
		result = client.ToolResult{Content: client.Content{client.Text("Captured the screen."), client.Image(shot, "image/png")}}
	case client.ToolZoom, client.ToolDate, client.ToolSearch:
		r, err := a.chat.CallTool(ctx, name, input)
		if err != nil {
			return result, err
		}
		result = *r
	default:
		result = client.ToolResult{Content: client.Content{client.Text("no tool " + name)}, IsError: true}
	}
	kept, err := a.chat.AfterTool(ctx, client.AfterToolInput{Call: client.Call{ID: id, Name: name}, Result: result})
	if err != nil {
		return result, fmt.Errorf("offloading its images: %w", err)
	}
	if _, err := a.chat.Append(ctx, a.receipt("tool-"+id), client.ToolResultMessage(id, name, kept.Result)); err != nil {
		return result, fmt.Errorf("logging its result: %w", err)
	}
	return kept.Result, nil
}

// toolParam is a memory tool for the Messages API.
func toolParam(t client.ToolDef) sdk.ToolUnionParam {
	var schema struct {
		Properties any      `json:"properties"`
		Required   []string `json:"required"`
	}
	_ = json.Unmarshal(t.Parameters, &schema) // a schema durachat made
	return sdk.ToolUnionParam{OfTool: &sdk.ToolParam{
		Name:        t.Name,
		Description: sdk.String(t.Description),
		InputSchema: sdk.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required},
	}}
}

// toolResultBlock is a kept result for the model. Its ref blocks are text
// blocks here; before-request turns them into images.
func toolResultBlock(id string, r client.ToolResult) sdk.ContentBlockParamUnion {
	var content []sdk.ToolResultBlockParamContentUnion
	for _, b := range r.Content {
		if b.Type == "text" {
			content = append(content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: b.Text}})
		}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &sdk.ToolResultBlockParam{
		ToolUseID: id, Content: content, IsError: sdk.Bool(r.IsError),
	}}
}

// assistantMessage is the model's answer as a pi-ai message, for the log.
func assistantMessage(msg *sdk.Message) client.Message {
	var blocks []client.Block
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			blocks = append(blocks, client.Text(b.Text))
		case "tool_use":
			blocks = append(blocks, client.ToolCall(b.ID, b.Name, b.Input))
		}
	}
	m := client.AssistantMessage(blocks...)
	m.Provider, m.Model, m.StopReason = "anthropic", string(msg.Model), string(msg.StopReason)
	return m
}

func textOf(msg *sdk.Message) string {
	var parts []string
	for _, b := range msg.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// screenshot draws a stand-in for the screen: a window with a title bar,
// a login form and the time in the colour of the title bar.
func screenshot() ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	fill := func(r image.Rectangle, c color.Color) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				img.Set(x, y, c)
			}
		}
	}
	fill(img.Bounds(), color.RGBA{240, 240, 240, 255})
	fill(image.Rect(0, 0, 320, 24), color.RGBA{uint8(time.Now().Second() * 4), 90, 160, 255})
	fill(image.Rect(80, 70, 240, 90), color.White)   // user name
	fill(image.Rect(80, 100, 240, 120), color.White) // password
	fill(image.Rect(200, 135, 240, 155), color.RGBA{200, 40, 40, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encoding the screenshot: %w", err)
	}
	return buf.Bytes(), nil
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

func or(v, fallback string) string {
	if v != "" {
		return v
	}
	return fallback
}
