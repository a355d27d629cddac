package memoryapi

import (
	"context"
	"encoding/json"
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
		return a.MCP(tenant), mcp.Options{OptIn: true}
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

// CallTool answers a memory tool as its route does, but an opt-in tool
// being off is a not-found error, not a tool result.
func (t *tenantMemory) CallTool(ctx context.Context, chat, name string, args json.RawMessage) (wire.ToolResult, error) {
	res, err := t.a.Memory.CallTool(ctx, t.tenant, chat, name, args)
	if off := (*memory.OffError)(nil); errors.As(err, &off) {
		return wire.ToolResult{}, api.NotFound("%s", off.Message())
	}
	return res, err
}

func (t *tenantMemory) Settings(ctx context.Context, chat string) (memory.Settings, error) {
	return t.a.Memory.Settings(ctx, t.tenant, chat)
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
