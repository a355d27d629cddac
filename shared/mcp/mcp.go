// Package mcp serves a tenant's durachat memory to any MCP host: the
// tools view, zoom, date, search and log, the images zoom opens as MCP
// image content, and the view and the images as resources. It is built on
// the official Go SDK and speaks the protocol versions that SDK speaks,
// over its streamable HTTP transport (Handler) or any other transport
// (Server.Run, such as stdio).
//
// The server knows nothing of stores or HTTP routes: it calls a Memory,
// which the local program wires over its stores and the stdio command may
// wire over a deployed stack's API.
package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Memory is one tenant's memory, as the MCP server reads and writes it.
// An error that is a *fault.Error is answered with its code; an outage
// (store.IsOutage) as unavailable, which the host may retry.
type Memory interface {
	// View is the chat's view; wait waits for its lines as
	// GET .../view?wait=turn does.
	View(ctx context.Context, chat string, wait bool) (wire.View, error)
	Zoom(ctx context.Context, chat string, a wire.ZoomArgs) (wire.ToolResult, error)
	Date(ctx context.Context, chat string, id int64) (wire.ToolResult, error)
	Search(ctx context.Context, chat string, a wire.SearchArgs) (wire.ToolResult, error)
	SearchEnabled(ctx context.Context, chat string) (bool, error)
	// Log appends messages (pi messages, as POST .../messages takes
	// them) under receipt ("" for none) and returns their ids.
	Log(ctx context.Context, chat, receipt string, messages json.RawMessage) ([]int64, error)
	// Image is a stored image's bytes and MIME type.
	Image(ctx context.Context, chat, name string) ([]byte, string, error)
}

// CallTimeout bounds every call the server makes to its Memory: a store
// that does not answer is an unavailable error the host can retry, never
// a hang.
const CallTimeout = 25 * time.Second

// Options configure a Server.
type Options struct {
	// Chat, when set, is the one chat the server serves: the tools take no
	// chat argument. Empty: each call names its chat.
	Chat string
	// Search offers the search tool. With Chat set, the tool is listed
	// only while search is on for that chat.
	Search bool
	// Timeout bounds each call to the Memory; 0 is CallTimeout.
	Timeout time.Duration
	// Version is the server's version, told to hosts.
	Version string
}

// Server is an MCP server over one tenant's Memory.
type Server struct {
	mem  Memory
	o    Options
	srv  *sdk.Server
	tool map[string]bool
}

// The resources: the view of a chat, and its images by name.
const (
	viewTemplate  = "durachat://chats/{chat}/view"
	imageTemplate = "durachat://chats/{chat}/images/{name}"
)

// ViewURI is the resource URI of chat's view.
func ViewURI(chat string) string { return "durachat://chats/" + chat + "/view" }

// ImageURI is the resource URI of image name of chat.
func ImageURI(chat, name string) string { return "durachat://chats/" + chat + "/images/" + name }

// NewServer returns the MCP server of mem.
func NewServer(mem Memory, o Options) (*Server, error) {
	if o.Timeout <= 0 {
		o.Timeout = CallTimeout
	}
	if o.Chat != "" {
		if err := api.CheckChat(o.Chat); err != nil {
			return nil, fmt.Errorf("mcp: the server's chat: %w", err)
		}
	}
	s := &Server{mem: mem, o: o}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "durachat", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "durachat is this conversation's long-term memory. Read the view (the tool or the resource) each turn; " +
			"each line starts with <start>+<count>: zoom into a line to see it one level down, down to the original messages and their images.",
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	if err := s.addTools(); err != nil {
		return nil, err
	}
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "view", URITemplate: viewTemplate, MIMEType: "text/plain",
		Description: "a chat's memory view: the text to put in the model's context each turn"}, s.readView)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "image", URITemplate: imageTemplate,
		Description: "an image a chat's messages name as [image <name>]"}, s.readImage)
	if o.Chat != "" {
		s.srv.AddResource(&sdk.Resource{Name: "view", URI: ViewURI(o.Chat), MIMEType: "text/plain",
			Description: "the memory view of chat " + o.Chat}, s.readView)
		if o.Search {
			s.srv.AddReceivingMiddleware(s.filterSearch)
		}
	}
	return s, nil
}

// SDK is the SDK's server, to run on a transport or serve over HTTP.
func (s *Server) SDK() *sdk.Server { return s.srv }

// Run serves one session on t (stdio, say) until it ends or ctx does.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error { return s.srv.Run(ctx, t) }

// chatArg is the chat argument every tool takes when the server serves no
// one chat.
type chatArg struct {
	Chat string `json:"chat"`
}

type viewArgs struct {
	chatArg
	// Wait waits (at most about 20 s) until the view's lines are
	// summarized, as GET .../view?wait=turn does.
	Wait bool `json:"wait,omitempty"`
}

type zoomArgs struct {
	chatArg
	wire.ZoomArgs
}

type dateArgs struct {
	chatArg
	ID int64 `json:"id"`
}

type searchArgs struct {
	chatArg
	wire.SearchArgs
}

type logArgs struct {
	chatArg
	Receipt  string           `json:"receipt,omitempty"`
	Messages []client.Message `json:"messages"`
}

// schema is T's JSON schema with the descriptions of def's parameters (the
// HTTP API's tool definitions), less the chat argument when the server
// serves one chat.
func (s *Server) schema(t any, def map[string]any, extra map[string]string) (*jsonschema.Schema, error) {
	sch, err := forType(t)
	if err != nil {
		return nil, err
	}
	props, _ := def["properties"].(map[string]any)
	for name, p := range sch.Properties {
		if prop, ok := props[name].(map[string]any); ok {
			if d, ok := prop["description"].(string); ok {
				p.Description = d
			}
		}
		if d, ok := extra[name]; ok {
			p.Description = d
		}
	}
	if s.o.Chat != "" {
		delete(sch.Properties, "chat")
		sch.Required = removeName(sch.Required, "chat")
	} else if p := sch.Properties["chat"]; p != nil {
		p.Description = "the chat id (1-128 of A-Z a-z 0-9 . _ -)"
	}
	return sch, nil
}

func forType(t any) (*jsonschema.Schema, error) {
	switch t.(type) {
	case viewArgs:
		return jsonschema.For[viewArgs](nil)
	case zoomArgs:
		return jsonschema.For[zoomArgs](nil)
	case dateArgs:
		return jsonschema.For[dateArgs](nil)
	case searchArgs:
		return jsonschema.For[searchArgs](nil)
	case logArgs:
		return jsonschema.For[logArgs](&jsonschema.ForOptions{IgnoreInvalidTypes: true})
	}
	return nil, fmt.Errorf("mcp: no schema for %T", t)
}

func removeName(names []string, name string) []string {
	out := names[:0:0]
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// memoryTools are the HTTP API's definitions of the memory tools, by name.
func memoryTools() map[string]memory.Tool {
	defs := map[string]memory.Tool{}
	for _, t := range memory.Tools(true) {
		defs[t.Name] = t
	}
	return defs
}

func (s *Server) addTools() error {
	defs := memoryTools()
	type spec struct {
		name, desc string
		args       any
		extra      map[string]string
		h          func(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error)
	}
	specs := []spec{
		{"view", "The chat's memory view: one line per block of entries, each starting <start>+<count>; zoom into a line to open it.",
			viewArgs{}, map[string]string{"wait": "wait (at most about 20 s) until every line is summarized"}, s.callView},
		{"zoom", defs["zoom"].Description, zoomArgs{}, nil, s.callZoom},
		{"date", defs["date"].Description, dateArgs{}, nil, s.callDate},
		{"log", "Log messages (pi-ai message shapes: role, content blocks of text or base64 images) to the chat's memory; answers their ids. " +
			"A receipt makes a retry safe: the same receipt again logs nothing twice.",
			logArgs{}, map[string]string{"receipt": "an id for this append (optional): a repeat with it logs nothing twice", "messages": "the messages to log, in order"}, s.callLog},
	}
	if s.o.Search {
		specs = append(specs, spec{"search", defs["search"].Description, searchArgs{}, nil, s.callSearch})
	}
	s.tool = map[string]bool{}
	for _, sp := range specs {
		sch, err := s.schema(sp.args, defs[sp.name].Parameters, sp.extra)
		if err != nil {
			return fmt.Errorf("mcp: the %s tool's schema: %w", sp.name, err)
		}
		h := sp.h
		s.tool[sp.name] = true
		s.srv.AddTool(&sdk.Tool{Name: sp.name, Description: sp.desc, InputSchema: sch}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			raw := req.Params.Arguments
			if len(raw) == 0 {
				raw = json.RawMessage("{}")
			}
			chat, err := s.chatOf(raw)
			if err != nil {
				return errorResult(err), nil
			}
			ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
			defer cancel()
			res, err := h(ctx, chat, raw)
			if err != nil {
				return errorResult(err), nil
			}
			return res, nil
		})
	}
	return nil
}

// chatOf is the chat a call names, or the server's.
func (s *Server) chatOf(raw json.RawMessage) (string, error) {
	if s.o.Chat != "" {
		return s.o.Chat, nil
	}
	var a chatArg
	if err := api.Unmarshal(raw, &a); err != nil {
		return "", err
	}
	if a.Chat == "" {
		return "", api.BadRequest("chat", "chat is required: the id of the chat to read")
	}
	return a.Chat, api.CheckChat(a.Chat)
}

func (s *Server) callView(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	var a viewArgs
	if err := api.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	v, err := s.mem.View(ctx, chat, a.Wait)
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: v.View}}, StructuredContent: v}, nil
}

func (s *Server) callZoom(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	var a zoomArgs
	if err := api.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	res, err := s.mem.Zoom(ctx, chat, a.ZoomArgs)
	if err != nil {
		return nil, err
	}
	return toolResult(chat, res)
}

func (s *Server) callDate(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	var a dateArgs
	if err := api.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	res, err := s.mem.Date(ctx, chat, a.ID)
	if err != nil {
		return nil, err
	}
	return toolResult(chat, res)
}

func (s *Server) callSearch(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	var a searchArgs
	if err := api.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	res, err := s.mem.Search(ctx, chat, a.SearchArgs)
	if err != nil {
		return nil, err
	}
	return toolResult(chat, res)
}

func (s *Server) callLog(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	var a struct {
		Receipt  string        `json:"receipt"`
		Messages rawjson.Value `json:"messages"` // a slice of raw, not a copy
	}
	if err := api.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	ids, err := s.mem.Log(ctx, chat, a.Receipt, json.RawMessage(a.Messages))
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		// A subscriber of the view reads it again; the lines of the new
		// messages are summarized after.
		_ = s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: ViewURI(chat)})
	}
	text, _ := json.Marshal(map[string]any{"ids": ids})
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: map[string]any{"ids": ids}}, nil
}

// toolResult turns a memory tool's result into MCP content: text blocks as
// text, and the images it carries as image content within the inline
// budget and image limit of before-request, spent as it spends them:
// newest first (from the end of the result back), closing at the first
// image that does not fit. Every image the text names that is not inline
// is a resource link the host can read.
func toolResult(chat string, res wire.ToolResult) (*sdk.CallToolResult, error) {
	out := &sdk.CallToolResult{IsError: res.IsError}
	inline := make([]sdk.Content, len(res.Content))
	budget, left, closed := int64(hooks.DefaultBudget), hooks.MaxImagesPi, false
	for i := len(res.Content) - 1; i >= 0; i-- {
		b := res.Content[i]
		if b.Type != "image" || closed {
			continue
		}
		if int64(len(b.Data)) > budget || left == 0 {
			closed = true
			continue
		}
		data, err := base64.StdEncoding.DecodeString(b.Data)
		if err != nil {
			return nil, fmt.Errorf("mcp: image %s of a tool result: %w", b.Name, err)
		}
		budget -= int64(len(b.Data))
		left--
		inline[i] = &sdk.ImageContent{Data: data, MIMEType: b.MimeType, Meta: sdk.Meta{"name": b.Name}}
	}
	shown := map[string]bool{}
	var named []string
	for i, b := range res.Content {
		switch {
		case inline[i] != nil:
			out.Content = append(out.Content, inline[i])
			shown[b.Name] = true
		case b.Type == "text":
			out.Content = append(out.Content, &sdk.TextContent{Text: b.Text})
			named = append(named, refs.Names(b.Text)...)
		case b.Type == "image":
			named = append(named, b.Name)
		}
	}
	for _, name := range named {
		if !shown[name] {
			shown[name] = true
			out.Content = append(out.Content, &sdk.ResourceLink{URI: ImageURI(chat, name), Name: name,
				Description: "image " + name + ", not attached inline; read this resource for its bytes"})
		}
	}
	return out, nil
}

// errorResult is err as an MCP tool error: its text, and durachat's error
// (code, message, field; retryAfterSeconds for an outage or a deletion
// under way) as the structured content, as the HTTP API answers it.
func errorResult(err error) *sdk.CallToolResult {
	fe := api.AsError(err)
	if errors.Is(err, context.DeadlineExceeded) {
		fe = api.Unavailable(err)
	}
	body := map[string]any{"code": fe.Code, "message": fe.Message}
	text := fe.Code + ": " + fe.Message
	if fe.Code != fault.Internal && fe.Code != fault.Unavailable {
		text = fe.Code + ": " + fe.Error()
		body["message"] = fe.Error()
	}
	if fe.Field != "" {
		body["field"] = fe.Field
	}
	if ra := api.RetryAfter(fe.Code); ra > 0 {
		body["retryAfterSeconds"] = int(ra / time.Second)
		text += fmt.Sprintf(" (retry in %d s)", int(ra/time.Second))
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: map[string]any{"error": body}}
}

// resourceChat is the chat of a durachat:// resource URI, and what follows
// it.
func resourceChat(uri string) (chat, rest string, err error) {
	p, ok := strings.CutPrefix(uri, "durachat://chats/")
	if !ok {
		return "", "", sdk.ResourceNotFoundError(uri)
	}
	chat, rest, _ = strings.Cut(p, "/")
	if api.CheckChat(chat) != nil {
		return "", "", sdk.ResourceNotFoundError(uri)
	}
	return chat, rest, nil
}

func (s *Server) readView(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	chat, rest, err := resourceChat(req.Params.URI)
	if err != nil || rest != "view" {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	v, err := s.mem.View(ctx, chat, false)
	if err != nil {
		return nil, resourceError(err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: v.View}}}, nil
}

func (s *Server) readImage(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	chat, rest, err := resourceChat(req.Params.URI)
	name, ok := strings.CutPrefix(rest, "images/")
	if err != nil || !ok || !refs.ValidName(name) {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	data, mime, err := s.mem.Image(ctx, chat, name)
	if err != nil {
		if fe := api.AsError(err); fe.Code == fault.NotFound {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		return nil, resourceError(err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: mime, Blob: data}}}, nil
}

// resourceError is err as a JSON-RPC error carrying durachat's error.
func resourceError(err error) error {
	fe := api.AsError(err)
	if errors.Is(err, context.DeadlineExceeded) {
		fe = api.Unavailable(err)
	}
	data, _ := json.Marshal(map[string]any{"code": fe.Code, "retryAfterSeconds": int(api.RetryAfter(fe.Code) / time.Second)})
	msg := fe.Message
	if fe.Code != fault.Internal && fe.Code != fault.Unavailable {
		msg = fe.Error()
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fe.Code + ": " + msg, Data: data}
}

// subscribe accepts subscriptions to a view; the server tells its
// subscribers when a log call through it changed the chat.
func (s *Server) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	if _, rest, err := resourceChat(req.Params.URI); err != nil || rest != "view" {
		return sdk.ResourceNotFoundError(req.Params.URI)
	}
	return nil
}

// filterSearch leaves the search tool out of the tool list while search
// is off for the server's chat.
func (s *Server) filterSearch(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*sdk.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		on, err := s.mem.SearchEnabled(cctx, s.o.Chat)
		if err != nil || on {
			return res, nil // an outage lists it; a call then says why it fails
		}
		tools := lr.Tools[:0:0]
		for _, t := range lr.Tools {
			if t.Name != "search" {
				tools = append(tools, t)
			}
		}
		lr.Tools = tools
		return lr, nil
	}
}
