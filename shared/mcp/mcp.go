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
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/transcript"
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
	// CallTool answers the memory tool name (one of memory.ToolTable)
	// with its arguments as JSON, as POST .../tools/{name} does.
	CallTool(ctx context.Context, chat, name string, args json.RawMessage) (wire.ToolResult, error)
	// Settings are the chat's opt-in settings: which opt-in memory tools
	// it has on.
	Settings(ctx context.Context, chat string) (memory.Settings, error)
	// Log appends req's messages (pi messages, as POST .../messages
	// takes them) under its receipt and returns their ids.
	Log(ctx context.Context, chat string, req transcript.AppendRequest) ([]int64, error)
	// Image is a stored image's bytes and MIME type.
	Image(ctx context.Context, chat, name string) ([]byte, string, error)
}

// CallTimeout bounds every call the server makes to its Memory but a log
// call's append (LogTimeout): a store that does not answer is an
// unavailable error the host can retry, never a hang.
const CallTimeout = 25 * time.Second

// LogTimeout bounds a log call's append. The append is not cut off at
// CallTimeout: cut off mid-write it may be logged all the same, and a host
// told only "unavailable" would log it again. It runs on, detached from
// the caller's cancellation, until it is done or LogTimeout passes (or,
// sooner, the caller's own deadline, such as a Lambda request's), and the
// answer says what became of it. It is under the 60 s the MCP TypeScript
// SDK's client waits for an answer by default.
const LogTimeout = 55 * time.Second

// answerMargin is the time a log call keeps before its caller's deadline
// to answer in.
const answerMargin = time.Second

// Options configure a Server.
type Options struct {
	// Chat, when set, is the one chat the server serves: the tools take no
	// chat argument. Empty: each call names its chat.
	Chat string
	// OptIn offers the opt-in memory tools (search, forget). With Chat
	// set, each is listed only while it is on for that chat.
	OptIn bool
	// Timeout bounds each call to the Memory but a log call's append; 0
	// is CallTimeout.
	Timeout time.Duration
	// LogTimeout bounds a log call's append; 0 is LogTimeout.
	LogTimeout time.Duration
	// Version is the server's version, told to hosts.
	Version string
}

// Server is an MCP server over one tenant's Memory.
type Server struct {
	mem Memory
	o   Options
	srv *sdk.Server
	// names are the tools' names.
	names map[string]bool
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
	if o.LogTimeout <= 0 {
		o.LogTimeout = LogTimeout
	}
	if o.Chat != "" {
		if err := api.CheckChat(o.Chat); err != nil {
			return nil, fmt.Errorf("mcp: the server's chat: %w", err)
		}
	}
	s := &Server{mem: mem, o: o, names: map[string]bool{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "durachat", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "durachat is this conversation's long-term memory. Read the view (the tool or the resource) each turn; " +
			"each line starts with <start>+<count>: zoom into a line to see it one level down, down to the original messages and their images.",
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		SetCacheable:       s.cacheHint,
	})
	if err := s.addTools(); err != nil {
		return nil, err
	}
	s.srv.AddReceivingMiddleware(s.refusedToolCall)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "view", URITemplate: viewTemplate, MIMEType: "text/plain",
		Description: "a chat's memory view: the text to put in the model's context each turn"}, s.readView)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "image", URITemplate: imageTemplate,
		Description: "an image a chat's messages name as [image <name>]"}, s.readImage)
	if o.Chat != "" {
		s.srv.AddResource(&sdk.Resource{Name: "view", URI: ViewURI(o.Chat), MIMEType: "text/plain",
			Description: "the memory view of chat " + o.Chat}, s.readView)
		if o.OptIn {
			s.srv.AddReceivingMiddleware(s.filterOptIn)
		}
	}
	return s, nil
}

// How long a host may keep a result before it asks again (the cache
// hints of server/discover, the lists and resources/read): what only a
// new release changes (the server's description, the tool and resource
// lists) for ListTTL; an image, named by its bytes, for ImageTTL; a view,
// which each turn changes, not at all.
const (
	ListTTL  = 5 * time.Minute
	ImageTTL = 10 * time.Minute
)

// cacheHint sets the cache hints of a result: private to the tenant that
// asked, always; kept for as long as what it says holds. A one-chat
// server that offers the opt-in tools lists them as the chat's settings
// say, which a call may change: its tool list is not kept.
func (s *Server) cacheHint(_ context.Context, req sdk.Request, c *sdk.Cacheable) {
	c.CacheScope = "private"
	c.TTLMs = int(ListTTL / time.Millisecond)
	switch r := req.(type) {
	case *sdk.ListToolsRequest:
		if s.o.Chat != "" && s.o.OptIn {
			c.TTLMs = 0
		}
	case *sdk.ReadResourceRequest:
		c.TTLMs = 0
		if _, rest, err := resourceChat(r.Params.URI); err == nil && strings.HasPrefix(rest, "images/") {
			c.TTLMs = int(ImageTTL / time.Millisecond)
		}
	}
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

type logArgs struct {
	chatArg
	Receipt  string           `json:"receipt,omitempty"`
	Messages []client.Message `json:"messages"`
}

// withChat is sch with the chat argument when the server serves no one
// chat, and without it when it does.
func (s *Server) withChat(sch *jsonschema.Schema) *jsonschema.Schema {
	sch = sch.CloneSchemas()
	delete(sch.Properties, "chat")
	sch.Required = removeName(sch.Required, "chat")
	if s.o.Chat == "" {
		sch.Properties["chat"] = &jsonschema.Schema{Type: "string", Description: "the chat id (1-128 of A-Z a-z 0-9 . _ -)"}
		sch.Required = append([]string{"chat"}, sch.Required...)
	}
	return sch
}

// logSchema is logArgs's schema as pi messages are: a message's content
// is a string or a list of content blocks, a toolCall block's arguments
// an object and a toolResult's details any JSON value (json.RawMessage
// alone would be a list of bytes), and a message or a block may carry
// fields durachat does not read (pi's usage, api, signatures): they are
// kept.
func logSchema() (*jsonschema.Schema, error) {
	raw := reflect.TypeFor[json.RawMessage]()
	block, err := jsonschema.For[wire.Block](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		raw: {Type: "object", Description: "a toolCall's arguments"}}})
	if err != nil {
		return nil, err
	}
	block.AdditionalProperties = nil
	sch, err := jsonschema.For[logArgs](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		raw: {Description: "any JSON value"},
		reflect.TypeFor[wire.Content](): {Types: []string{"string", "array"}, Items: block,
			Description: "a string, or content blocks: text (text), image (data: base64, mimeType), toolCall (id, name, arguments), thinking (thinking)"},
	}})
	if err != nil {
		return nil, err
	}
	msgs := sch.Properties["messages"]
	msgs.Type, msgs.Types = "array", nil
	msgs.Items.AdditionalProperties = nil
	return sch, nil
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

// tool is one tool of the server: the memory tools of memory.ToolTable,
// and the server's own, view and log.
type tool struct {
	name, desc string
	schema     *jsonschema.Schema
	// effect is what a call does to the memory (its MCP annotations).
	effect effect
	h      func(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error)
	// bounded: the handler bounds its calls itself (log), not by the
	// call's timeout.
	bounded bool
}

// effect is what a tool's call does to the chat's memory.
type effect int

const (
	// reads: the call changes nothing (view, zoom, date, search).
	reads effect = iota
	// appends: the call adds to the log, and a repeat under the same
	// receipt adds nothing (log).
	appends
	// erases: the call erases for good; the same request again is the
	// same erasure (forget).
	erases
)

// annotations are the MCP hints of a tool of effect e. Every tool works on
// the chat's memory alone: none reaches the world outside it.
func (e effect) annotations() *sdk.ToolAnnotations {
	closed := false
	a := &sdk.ToolAnnotations{OpenWorldHint: &closed}
	switch e {
	case reads:
		a.ReadOnlyHint = true
	case appends:
		a.IdempotentHint, a.DestructiveHint = true, &closed
	case erases:
		destructive := true
		a.IdempotentHint, a.DestructiveHint = true, &destructive
	}
	return a
}

// tools are the server's tools: its own and, in the order the model is
// given them, the memory tools (an opt-in one only when o.OptIn).
func (s *Server) tools() ([]tool, error) {
	view, err := jsonschema.For[viewArgs](nil)
	if err != nil {
		return nil, err
	}
	view.Properties["wait"].Description = "wait (at most about 20 s) until every line is summarized"
	log, err := logSchema()
	if err != nil {
		return nil, err
	}
	log.Properties["receipt"].Description = "an id for this append (optional; without one it is made of the messages): a repeat with it logs nothing twice"
	log.Properties["messages"].Description = "the messages to log, in order"
	tools := []tool{
		{"view", "The chat's memory view: one line per block of entries, each starting <start>+<count>; zoom into a line to open it.",
			view, reads, s.callView, false},
		{"log", "Log messages (pi-ai message shapes: role, content blocks of text or base64 images) to the chat's memory; answers their ids. " +
			"A retry is safe: the same messages again under the same receipt (given, or made of the messages when none is) log nothing twice.",
			log, appends, s.callLog, true},
	}
	for _, t := range memory.ToolTable() {
		if t.OptIn != "" && !s.o.OptIn {
			continue
		}
		e := reads
		if t.Destructive {
			e = erases
		}
		tools = append(tools, tool{t.Name, t.Description, t.Parameters, e, s.memoryTool(t.Name), false})
	}
	return tools, nil
}

func (s *Server) addTools() error {
	tools, err := s.tools()
	if err != nil {
		return fmt.Errorf("mcp: the tools' schemas: %w", err)
	}
	for _, t := range tools {
		s.names[t.name] = true
		h, bounded := t.h, t.bounded
		st := &sdk.Tool{Name: t.name, Description: t.desc, InputSchema: s.withChat(t.schema)}
		st.Annotations = t.effect.annotations()
		s.srv.AddTool(st, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			raw := req.Params.Arguments
			if len(raw) == 0 {
				raw = json.RawMessage("{}")
			}
			chat, err := s.chatOf(raw)
			if err != nil {
				return errorResult(err), nil
			}
			if !bounded {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, s.o.Timeout)
				defer cancel()
			}
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

// memoryTool is the handler of the memory tool name: its arguments, less
// the chat, go to the Memory as the host wrote them.
func (s *Server) memoryTool(name string) func(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	return func(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
		var args map[string]json.RawMessage
		if err := api.Unmarshal(raw, &args); err != nil {
			return nil, err
		}
		delete(args, "chat")
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		res, err := s.mem.CallTool(ctx, chat, name, raw)
		if err != nil {
			return nil, err
		}
		return toolResult(chat, res)
	}
}

// callLog appends the messages as POST .../messages does, under their
// receipt, or one made of the messages (transcript.ReceiptOf) when the
// host sends none: a host that repeats a call it got no answer to logs
// nothing twice. The append runs in appendContext, not cut off at the
// call's timeout; when it does not succeed all the same, the answer says
// whether the messages may have been logged.
func (s *Server) callLog(ctx context.Context, chat string, raw json.RawMessage) (*sdk.CallToolResult, error) {
	req, err := transcript.DecodeAppend(raw)
	if err != nil {
		return nil, err
	}
	if req.Receipt == "" {
		if req.Receipt, err = transcript.ReceiptOf(req.Messages); err != nil {
			return nil, err
		}
	}
	actx, cancel, bound := s.appendContext(ctx)
	ids, err := s.mem.Log(actx, chat, req)
	cut := actx.Err() != nil
	cancel()
	if err != nil {
		return logError(err, req.Receipt, cut, bound), nil
	}
	if len(ids) > 0 {
		// A subscriber of the view reads it again; the lines of the new
		// messages are summarized after.
		_ = s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: ViewURI(chat)})
	}
	text, _ := json.Marshal(map[string]any{"ids": ids})
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: map[string]any{"ids": ids}}, nil
}

// appendContext is the context a log call's append runs in: detached
// from the caller's cancellation (the call's timeout, a host that gives
// up), so an append under way is not cut off mid-write; bounded by
// LogTimeout, and ending answerMargin before the caller's own deadline
// when it has one, so the answer still reaches the host. bound is the
// time it gives the append.
func (s *Server) appendContext(ctx context.Context) (actx context.Context, cancel context.CancelFunc, bound time.Duration) {
	now := time.Now()
	end := now.Add(s.o.LogTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-answerMargin).Before(end) {
		end = d.Add(-answerMargin)
	}
	actx, cancel = context.WithDeadline(context.WithoutCancel(ctx), end)
	return actx, cancel, end.Sub(now)
}

// logError is the answer to a log call whose append failed. A refusal
// (bad input, a receipt used for other messages, a deleted chat) logged
// nothing: an append is all or nothing, and it is refused before it
// writes. An outage, or an append cut off at its bound, may have logged
// the messages all the same: the answer says so ("logged": "unknown")
// and names the receipt under which a retry logs nothing twice.
func logError(err error, receipt string, cut bool, bound time.Duration) *sdk.CallToolResult {
	fe := api.AsError(err)
	if cut || errors.Is(err, context.DeadlineExceeded) {
		fe = api.Unavailable(err)
	}
	if fe.Code != fault.Unavailable && fe.Code != fault.Internal {
		return errorResult(fe)
	}
	why := "the append failed"
	if cut {
		why = fmt.Sprintf("the append did not finish within the %v it had", bound.Round(time.Millisecond))
	}
	msg := fmt.Sprintf("%s: the messages may have been logged; "+
		"call log again with the same messages and receipt %q: it logs them once and answers their ids", why, receipt)
	return errorResultWith(&fault.Error{Code: fe.Code, Message: msg}, map[string]any{"logged": "unknown", "receipt": receipt})
}

// toolResult turns a memory tool's result into MCP content: text blocks as
// text, and the images it carries as image content within the inline
// budget and image limit of before-request, spent as it spends them:
// newest first (from the end of the result back), closing at the first
// image that does not fit. Every image the text names that is not inline
// is a resource link the host can read.
func toolResult(chat string, res wire.ToolResult) (*sdk.CallToolResult, error) {
	if res.IsError {
		return refusedCall(res), nil
	}
	out := &sdk.CallToolResult{}
	inline := make([]sdk.Content, len(res.Content))
	budget := hooks.NewInlineBudget(hooks.DefaultBudget, hooks.MaxImagesPi)
	for i := len(res.Content) - 1; i >= 0; i-- {
		b := res.Content[i]
		if b.Type != "image" || !budget.Take(int64(len(b.Data))) {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(b.Data)
		if err != nil {
			return nil, fmt.Errorf("mcp: image %s of a tool result: %w", b.Name, err)
		}
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

// refusedCall is a memory tool's error result as an MCP tool error: the
// memory tools answer a call whose arguments they cannot serve (an id
// past the log, n not a power of two) with its reason, a bad request.
func refusedCall(res wire.ToolResult) *sdk.CallToolResult {
	var text []string
	for _, b := range res.Content {
		if b.Type == "text" {
			text = append(text, b.Text)
		}
	}
	return errorResult(&fault.Error{Code: fault.BadRequest, Message: strings.Join(text, "\n")})
}

// errorResult is err as an MCP tool error: its text, and durachat's error
// (code, message, field; retryAfterSeconds for an outage or a deletion
// under way) as the structured content, as the HTTP API answers it.
func errorResult(err error) *sdk.CallToolResult { return errorResultWith(err, nil) }

// errorResultWith is errorResult with extra fields in its error.
func errorResultWith(err error, extra map[string]any) *sdk.CallToolResult {
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
	maps.Copy(body, extra)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: map[string]any{"error": body}}
}

// refusedToolCall gives a tool call the SDK refuses before any tool
// answers it (a tool the server does not have, parameters that are not a
// call's) durachat's error code, as its tools' errors carry it: not_found
// for an unknown tool, bad_request for the rest.
func (s *Server) refusedToolCall(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		je, ok := errors.AsType[*jsonrpc.Error](err)
		if method != "tools/call" || !ok || je.Data != nil {
			return res, err
		}
		code := fault.BadRequest
		if call, ok := req.(*sdk.CallToolRequest); ok && call.Params != nil && !s.names[call.Params.Name] {
			code = fault.NotFound
		}
		data, _ := json.Marshal(map[string]any{"code": code})
		return res, &jsonrpc.Error{Code: je.Code, Message: code + ": " + je.Message, Data: data}
	}
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

// filterOptIn leaves the opt-in memory tools (search, forget) out of the
// tool list while they are off for the server's chat.
func (s *Server) filterOptIn(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*sdk.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		on, err := s.mem.Settings(cctx, s.o.Chat)
		if err != nil {
			return res, nil // an outage lists them; a call then says why it fails
		}
		off := map[string]bool{}
		for _, t := range memory.ToolTable() {
			off[t.Name] = !on.On(t.OptIn)
		}
		tools := lr.Tools[:0:0]
		for _, t := range lr.Tools {
			if !off[t.Name] {
				tools = append(tools, t)
			}
		}
		lr.Tools = tools
		return lr, nil
	}
}
