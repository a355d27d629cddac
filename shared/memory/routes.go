package memory

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
)

// Register adds memory's routes: the view, the tools and their
// definitions, the status, the tree, and the chat's memory settings.
func (m *Memory) Register(mux *http.ServeMux) {
	api.Handle(mux, "GET /v1/chats/{chat}/view", m.handleView)
	api.Handle(mux, "POST /v1/chats/{chat}/tools/zoom", m.handleZoom)
	api.Handle(mux, "POST /v1/chats/{chat}/tools/date", m.handleDate)
	api.Handle(mux, "POST /v1/chats/{chat}/tools/search", m.handleSearch)
	api.Handle(mux, "GET /v1/chats/{chat}/tools", m.handleTools)
	api.Handle(mux, "GET /v1/chats/{chat}/status", m.handleStatus)
	api.Handle(mux, "GET /v1/chats/{chat}/tree", m.handleTree)
	api.Handle(mux, "PUT /v1/chats/{chat}/memory/settings", m.handleSettings)
}

// requestChat is the current incarnation of the request's chat: read once
// per request, so everything the request reads and writes is of one.
func (m *Memory) requestChat(r *http.Request) (chatid.Chat, error) {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return chatid.Chat{}, err
	}
	return m.current(r.Context(), tenant, chat)
}

// pumpQuietly runs the scheduler for a tool call; the tool answers even
// when the scheduler cannot run (the next call tries again).
func (m *Memory) pumpQuietly(ctx context.Context, c chatid.Chat) {
	if _, err := m.pump(ctx, c, -1); err != nil {
		api.Logger(ctx).WarnContext(ctx, "memory: scheduler run failed", "chat", c.ID, "err", err)
	}
}

func (m *Memory) handleView(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	wait := false
	switch v := r.URL.Query().Get("wait"); v {
	case "":
	case "turn":
		wait = true
	default:
		return api.BadRequest("wait", "wait must be \"turn\" or absent, not %q", v)
	}
	v, err := m.readView(r.Context(), c, wait)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, v)
	return nil
}

func (m *Memory) handleZoom(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	var args ZoomArgs
	if err := api.DecodeJSON(r, &args); err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	res, err := m.zoom(r.Context(), c, args)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, res)
	return nil
}

func (m *Memory) handleDate(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	var args struct {
		ID Int `json:"id"`
	}
	if err := api.DecodeJSON(r, &args); err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	res, err := m.date(r.Context(), c, args.ID)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, res)
	return nil
}

// SearchOffMessage says how to turn search on.
const SearchOffMessage = "the search tool is off for this chat; turn it on with PUT /v1/chats/{chat}/memory/settings and the body {\"search\": true}, or for every chat in the server's configuration"

func (m *Memory) handleSearch(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	var args SearchArgs
	if err := api.DecodeJSON(r, &args); err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	res, err := m.searchIn(r.Context(), c, args)
	if errors.Is(err, ErrSearchOff) {
		// A tool result a host can hand its model as it is, with a 404.
		api.WriteJSON(w, http.StatusNotFound, toolError("%s", SearchOffMessage))
		return nil
	}
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, res)
	return nil
}

func (m *Memory) handleTools(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	on, err := m.searchEnabled(r.Context(), c)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"tools": Tools(on)})
	return nil
}

func (m *Memory) handleStatus(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	s, err := m.status(r.Context(), c)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, s)
	return nil
}

func (m *Memory) handleSettings(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	var body struct {
		Search *bool `json:"search"`
	}
	if err := api.DecodeJSON(r, &body); err != nil {
		return err
	}
	if body.Search == nil {
		return api.BadRequest("search", "search (true or false) is the setting to change, and it is missing")
	}
	c, err := m.opening(r.Context(), tenant, chat)
	if err != nil {
		return err
	}
	if err := m.setSearch(r.Context(), c, *body.Search); err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"search": *body.Search})
	return nil
}

// Tool is a tool definition a host passes to its model.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// Tools lists memory's tool definitions; search only when it is on.
func Tools(search bool) []Tool {
	integer := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	tools := []Tool{
		{
			Name: "zoom",
			Description: "Open part of the chat memory. Each view line starts with <start>+<count>: " +
				"zoom with id=<start> and n=<count> shows the two halves of that line one level down; " +
				"n=1 shows the original entry word for word, with its images, in pages of 25,000 characters " +
				"(offset and limit choose the page). Any aligned block can be opened: n a power of two, id a multiple of n.",
			Parameters: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"id":     integer("first entry of the block (the number before the + in a view line)"),
					"n":      integer("block size, a power of two; 1 (the default) opens one original entry"),
					"offset": integer("with n=1: the character to start the page at (default 0)"),
					"limit":  integer("with n=1: the page length in characters (default and most 25000)"),
				},
				"required":             []string{"id"},
				"additionalProperties": false,
			},
		},
		{
			Name:        "date",
			Description: "The date and time an entry of the chat was logged.",
			Parameters: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"id": integer("the entry's id")},
				"required":             []string{"id"},
				"additionalProperties": false,
			},
		},
	}
	if search {
		tools = append(tools, Tool{
			Name: "search",
			Description: "Find original chat entries containing a text (case-insensitive; summaries and logged results of the memory tools are not searched). " +
				"Newest first, 20 per page, each with its id, date, a snippet and the summary line holding it; " +
				"pass before=<id> for older hits.",
			Parameters: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"text":   map[string]any{"type": "string", "description": "the text to find"},
					"before": integer("only entries with a smaller id (for the next page)"),
				},
				"required":             []string{"text"},
				"additionalProperties": false,
			},
		})
	}
	return tools
}

// Status reads a chat's memory status.
func (m *Memory) Status(ctx context.Context, tenant, chat string) (wire.Status, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.Status{}, err
	}
	return m.status(ctx, c)
}

// status is Status of the incarnation c.
func (m *Memory) status(ctx context.Context, c chatid.Chat) (wire.Status, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return wire.Status{}, err
	}
	nodes := st.nodes()
	s := wire.Status{
		Entries: st.T, Nodes: nodes, Built: st.Built, Unbuilt: nodes - st.Built,
		UnbuiltLines: st.unbuiltLeaves(), Retrying: st.waiting(), InFlight: len(st.Claims),
		Stalled: st.stalled(), LastError: st.LastError, MechanicalCount: st.MechanicalCount,
		ModelCalls: st.ModelCalls, Verbatim: st.Verbatim, FailedBuilds: st.Failed,
		View:           wire.ViewCounts{Lines: st.View.lines(), Bytes: st.View.Size, MergePassOpen: st.View.Open, Merges: st.View.Merges},
		CompactionView: wire.ViewCounts{Lines: st.Compact.lines(), Bytes: st.Compact.Size, MergePassOpen: st.Compact.Open, Merges: st.Compact.Merges},
		Images: wire.ImageCounts{Leaves: st.ImageTotals.Leaves, Attached: st.ImageTotals.Attached, Skipped: st.ImageTotals.Skipped,
			Missing: st.ImageTotals.Missing, NamesOnly: st.ImageTotals.NamesOnly,
			Described: st.ImageTotals.Described, DescribeFailed: st.ImageTotals.DescribeFailed, DescribePending: st.ImageTotals.Undescribed,
			Recent: []wire.LeafImages{}},
		Mechanical: []wire.MechanicalNode{},
		Search:     m.searchOn(st),
	}
	if m.chats != nil {
		if s.Deleting, err = m.chats.Deletion(ctx, c.Tenant, c.ID); err != nil {
			return wire.Status{}, err
		}
	}
	if st.LastErrorAt != 0 {
		at := time.UnixMilli(st.LastErrorAt).UTC()
		s.LastErrorAt = &at
	}
	for _, r := range st.Retries {
		s.Retries = append(s.Retries, wire.NodeRetry{Node: r.node().Label(), Failures: r.Failures, Refusals: r.Refusals,
			Next: time.UnixMilli(r.At).UTC(), Error: r.Err})
	}
	for _, li := range st.ImageLeaves {
		s.Images.Recent = append(s.Images.Recent, wire.LeafImages{ID: li.I, Named: li.Named, Attached: li.Attached,
			Skipped: li.Skipped, Missing: li.Missing, AlreadySeen: li.Resent, NamesOnly: li.NamesOnly,
			Described: li.Described, DescribeFailed: li.DescribeFailed, DescribePending: li.Undescribed})
	}
	if len(st.Mechanical) > 0 {
		rows, err := m.rows(ctx, c, st.Mechanical)
		if err != nil {
			return wire.Status{}, err
		}
		for _, n := range st.Mechanical {
			s.Mechanical = append(s.Mechanical, wire.MechanicalNode{Node: n.Label(), Line: rows[n].line})
		}
	}
	return s, nil
}

// Glance is the memory of the incarnation c at a glance, from its state
// alone: one read.
func (m *Memory) Glance(ctx context.Context, c chatid.Chat) (wire.MemoryGlance, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return wire.MemoryGlance{}, err
	}
	return wire.MemoryGlance{Nodes: st.nodes(), Built: st.Built, Retrying: st.waiting(), Stalled: st.stalled()}, nil
}
