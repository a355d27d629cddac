package memoryapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

// MCPRoutes serve the MCP endpoint (POST /v1/mcp) over this API's memory
// for every tenant; stateless in Lambda (see mcp.Routes). A post's body
// takes its room among the appends held (AppendsHeld) before the SDK
// reads it: a log call is an append.
func (a *API) MCPRoutes(stateless bool) api.Routes {
	return heldRoutes{routes: mcp.NewRoutes(func(tenant string) (mcp.Memory, mcp.Options) {
		return a.MCP(tenant), mcp.Options{Search: true}
	}, stateless), pattern: mcp.Pattern, held: a.appends.Copies(MCPCopies)}
}

// heldRoutes are routes under one pattern served once the request's body
// has room in held.
type heldRoutes struct {
	routes  api.Routes
	pattern string
	held    *api.Held
}

func (h heldRoutes) Register(mux *http.ServeMux) {
	inner := http.NewServeMux()
	h.routes.Register(inner)
	mux.Handle(h.pattern, h.held.Handler(inner))
}

// MCP is the tenant's memory as the MCP server reads and writes it: the
// same calls the HTTP routes make.
func (a *API) MCP(tenant string) mcp.Memory { return &tenantMemory{a: a, tenant: tenant} }

type tenantMemory struct {
	a      *API
	tenant string
}

func (t *tenantMemory) View(ctx context.Context, chat string, wait bool) (wire.View, error) {
	return t.a.Memory.ReadView(ctx, t.tenant, chat, wait)
}

func (t *tenantMemory) Zoom(ctx context.Context, chat string, z wire.ZoomArgs) (wire.ToolResult, error) {
	args := memory.ZoomArgs{ID: memory.Int{V: z.ID, Set: true}}
	if z.N != 0 {
		args.N = memory.Int{V: z.N, Set: true}
	}
	if z.Offset != 0 {
		args.Offset = memory.Int{V: z.Offset, Set: true}
	}
	if z.Limit != 0 {
		args.Limit = memory.Int{V: z.Limit, Set: true}
	}
	t.pump(ctx, chat)
	return t.a.Memory.Zoom(ctx, t.tenant, chat, args)
}

// pump runs the chat's scheduler before a tool call, as the tool routes
// do; the tool answers even when it cannot run.
func (t *tenantMemory) pump(ctx context.Context, chat string) {
	if err := t.a.Memory.Pump(ctx, t.tenant, chat); err != nil {
		api.Logger(ctx).WarnContext(ctx, "mcp: scheduler run failed", "chat", chat, "err", err)
	}
}

func (t *tenantMemory) Date(ctx context.Context, chat string, id int64) (wire.ToolResult, error) {
	t.pump(ctx, chat)
	return t.a.Memory.Date(ctx, t.tenant, chat, memory.Int{V: id, Set: true})
}

func (t *tenantMemory) Search(ctx context.Context, chat string, s wire.SearchArgs) (wire.ToolResult, error) {
	args := memory.SearchArgs{Text: s.Text}
	if s.Before != 0 {
		args.Before = memory.Int{V: s.Before, Set: true}
	}
	t.pump(ctx, chat)
	res, err := t.a.Memory.Search(ctx, t.tenant, chat, args)
	if errors.Is(err, memory.ErrSearchOff) {
		return wire.ToolResult{}, api.NotFound("%s", memory.SearchOffMessage)
	}
	return res, err
}

func (t *tenantMemory) SearchEnabled(ctx context.Context, chat string) (bool, error) {
	return t.a.Memory.SearchEnabled(ctx, t.tenant, chat)
}

func (t *tenantMemory) Log(ctx context.Context, chat string, req transcript.AppendRequest) ([]int64, error) {
	return transcript.NewRoutes(t.a.Transcript, t.a.Images, t.a.Memory).Append(ctx, t.tenant, chat, req)
}

func (t *tenantMemory) Image(ctx context.Context, chat, name string) ([]byte, string, error) {
	img, err := t.a.Transcript.ChatImage(ctx, t.tenant, chat, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", api.NotFound("no image %s", name)
	}
	if err != nil {
		return nil, "", err
	}
	return img.Data, img.MimeType, nil
}
