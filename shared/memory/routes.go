package memory

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
)

// Register adds memory's routes: the view, the tools and their
// definitions, the status, the tree, and the chat's memory settings.
func (m *Memory) Register(mux *http.ServeMux) {
	api.Handle(mux, "GET /v1/chats/{chat}/view", m.handleView)
	m.registerTools(mux)
	api.Handle(mux, "GET /v1/chats/{chat}/tools", m.handleTools)
	api.Handle(mux, "GET /v1/chats/{chat}/status", m.handleStatus)
	api.Handle(mux, "GET /v1/chats/{chat}/tree", m.handleTree)
	api.Handle(mux, "PUT /v1/chats/{chat}/memory/settings", m.handleSettings)
	api.Handle(mux, "GET /v1/chats/{chat}/memory/settings", m.handleGetSettings)
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

func (m *Memory) handleTools(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	m.pumpQuietly(r.Context(), c)
	on, err := m.chatSettings(r.Context(), c)
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
		Forget *bool `json:"forget"`
	}
	if err := api.DecodeJSON(r, &body); err != nil {
		return err
	}
	if body.Search == nil && body.Forget == nil {
		return api.BadRequest("search", "search or forget (true or false) is the setting to change, and both are missing")
	}
	c, err := m.opening(r.Context(), tenant, chat)
	if err != nil {
		return err
	}
	if err := m.setSettings(r.Context(), c, body.Search, body.Forget); err != nil {
		return err
	}
	out := map[string]any{}
	if body.Search != nil {
		out["search"] = *body.Search
	}
	if body.Forget != nil {
		out["forget"] = *body.Forget
	}
	api.WriteJSON(w, http.StatusOK, out)
	return nil
}

// handleGetSettings answers the chat's settings: its opt-in tools and how
// search ranks (by words alone without an embedding model).
func (m *Memory) handleGetSettings(w http.ResponseWriter, r *http.Request) error {
	c, err := m.requestChat(r)
	if err != nil {
		return err
	}
	on, err := m.chatSettings(r.Context(), c)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, wire.MemorySettings{Search: on.Search, Forget: on.Forget, SearchMode: m.searchMode(), EmbedModel: m.EmbedModel()})
	return nil
}

// searchMode is how search ranks: by words, and by meaning too when an
// embedding model is set.
func (m *Memory) searchMode() string {
	if m.embedder == nil {
		return wire.SearchLexical
	}
	return wire.SearchLexicalVector
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
		SearchMode: m.searchMode(),
		EmbedModel: m.EmbedModel(),
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
		rows, err := m.rows(ctx, c, st.Gen, slices.DeleteFunc(slices.Clone(st.Mechanical), func(n Node) bool { return !st.built(n) }))
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
