package mcp

import (
	"net/http"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/api"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pattern is the route of the MCP endpoint, under the API's auth: every
// method goes to the SDK's streamable HTTP handler, which answers those
// the transport does not take.
const Pattern = "/v1/mcp"

// StatelessVersion is the first protocol revision without sessions
// (2026-07-28): no initialize, each request carries its version and the
// client's identity in its _meta and in the MCP-Protocol-Version header,
// and server/discover tells a client what the server speaks.
const StatelessVersion = "2026-07-28"

// versionHeader names a request's protocol version.
const versionHeader = "Mcp-Protocol-Version"

// SessionIdle is how long a stateful endpoint keeps a session no request
// has used.
const SessionIdle = 30 * time.Minute

// sessionHeader names a stateful endpoint's session.
const sessionHeader = "Mcp-Session-Id"

// Tenants gives the Memory of a tenant, and the options of its server.
type Tenants func(tenant string) (Memory, Options)

// Routes serve the MCP endpoint of every tenant over the streamable HTTP
// transport. Stateless (Lambda, where no process outlives a request): each
// POST is answered alone, with a JSON response, and GET (the stream a
// session's notifications go down) is refused. Stateful (the local server):
// sessions live in the process, a GET stream carries a session's
// notifications (a view subscribed to), and a session is its tenant's
// alone.
//
// Either way, a request at StatelessVersion or later (its
// MCP-Protocol-Version header says so) is answered alone, as JSON: the
// revisions from 2026-07-28 have no sessions, so a stateful endpoint
// serves them beside the sessions of the revisions before.
type Routes struct {
	tenants   Tenants
	stateless bool

	mu      sync.Mutex
	servers map[string]*Server
	h       *sdk.StreamableHTTPHandler
	// alone answers each request alone: rt.h itself when stateless.
	alone *sdk.StreamableHTTPHandler
}

// NewRoutes returns the MCP routes over tenants.
func NewRoutes(tenants Tenants, stateless bool) *Routes {
	rt := &Routes{tenants: tenants, stateless: stateless, servers: map[string]*Server{}}
	rt.h = rt.handler(stateless)
	rt.alone = rt.h
	if !stateless {
		rt.alone = rt.handler(true)
	}
	return rt
}

// handler is the SDK's streamable HTTP handler over the tenants' servers.
func (rt *Routes) handler(stateless bool) *sdk.StreamableHTTPHandler {
	return sdk.NewStreamableHTTPHandler(rt.server, &sdk.StreamableHTTPOptions{
		Stateless:    stateless,
		JSONResponse: stateless,
		// The API's server limits the body already (api.MaxBody).
		MaxRequestBodyBytes: api.MaxBody,
		// A stateful endpoint closes a session idle this long.
		SessionTimeout: SessionIdle,
	})
}

// sessionless reports whether r is at a protocol revision without
// sessions. Versions are dates, so they order as strings do.
func sessionless(r *http.Request) bool {
	return r.Header.Get(versionHeader) >= StatelessVersion
}

// server is the MCP server of the request's tenant, made once per tenant.
func (rt *Routes) server(r *http.Request) *sdk.Server {
	tenant := api.Tenant(r.Context())
	if tenant == "" {
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if s, ok := rt.servers[tenant]; ok {
		return s.SDK()
	}
	mem, o := rt.tenants(tenant)
	s, err := NewServer(mem, o)
	if err != nil {
		api.Logger(r.Context()).Error("mcp: making the tenant's server", "err", err)
		return nil
	}
	rt.servers[tenant] = s
	return s.SDK()
}

// Register adds the MCP endpoint.
func (rt *Routes) Register(mux *http.ServeMux) {
	api.Handle(mux, Pattern, func(w http.ResponseWriter, r *http.Request) error {
		tenant := api.Tenant(r.Context())
		if tenant == "" {
			return api.Unauthorized("the request has no authenticated tenant")
		}
		if sessionless(r) {
			rt.alone.ServeHTTP(w, r)
			return nil
		}
		if id := r.Header.Get(sessionHeader); id != "" && !rt.stateless && !rt.owns(tenant, id) {
			// A session is its tenant's alone: to another it does not exist.
			return api.NotFound("no MCP session %s", id)
		}
		rt.h.ServeHTTP(w, r)
		return nil
	})
}

// owns reports whether session id is one of tenant's. A session's tenant
// is the server it is connected to: the SDK connects it to the server of
// the request that opened it before the answer names its id, and takes it
// off when it ends (closed, or idle too long). So nothing a request sends
// moves a session to another tenant, and an id no server of tenant holds
// (another's, an ended one, a made-up one) is never handed to the SDK.
func (rt *Routes) owns(tenant, id string) bool {
	rt.mu.Lock()
	s, ok := rt.servers[tenant]
	rt.mu.Unlock()
	if !ok {
		return false
	}
	for ss := range s.SDK().Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}
