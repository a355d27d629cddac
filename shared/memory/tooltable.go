package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is one memory tool: its name, its description for the model, its
// arguments A (the wire type, whose JSON schema the model, the MCP server
// and the OpenAPI document are given) and its call over one incarnation
// of a chat. Each is written once, in toolTable; every surface (the HTTP
// route, the model's tool list, the MCP server's tools, the OpenAPI
// document and with it the TypeScript types) is made from it.
type Tool[A any] struct {
	Name        string
	Description string
	// Summary is the line of the tool's route in the OpenAPI document.
	Summary string
	// OptIn, when set, is the chat setting (SettingSearch, SettingForget)
	// that offers the tool: it is offered only while that is on.
	OptIn string
	// Destructive tools erase what they are called on (the MCP
	// annotation destructiveHint).
	Destructive bool
	Call        func(m *Memory, ctx context.Context, c chatid.Chat, a A) (wire.ToolResult, error)
}

// ToolSpec is a memory tool with the type of its arguments erased, as the
// surfaces read it.
type ToolSpec struct {
	Name, Description, Summary string
	OptIn                      string
	Destructive                bool
	// Parameters is the JSON schema of the tool's arguments.
	Parameters *jsonschema.Schema
	call       func(m *Memory, ctx context.Context, c chatid.Chat, raw []byte) (wire.ToolResult, error)
}

// spec is t with its arguments' type erased: they are decoded as every
// request body is (api.Unmarshal), into A.
func (t Tool[A]) spec() ToolSpec {
	sch, err := jsonschema.For[A](argSchemas)
	if err != nil {
		panic(fmt.Sprintf("memory: the %s tool's arguments have no JSON schema: %v", t.Name, err))
	}
	return ToolSpec{Name: t.Name, Description: t.Description, Summary: t.Summary, OptIn: t.OptIn, Destructive: t.Destructive, Parameters: sch,
		call: func(m *Memory, ctx context.Context, c chatid.Chat, raw []byte) (wire.ToolResult, error) {
			var a A
			if err := api.Unmarshal(raw, &a); err != nil {
				return wire.ToolResult{}, err
			}
			m.pumpQuietly(ctx, c)
			return t.Call(m, ctx, c, a)
		}}
}

// argSchemas are the schemas of the tools' argument types the default
// does not fit: a list of ids is never null (a nil one is left out).
var argSchemas = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[[]int64](): {Type: "array", Items: &jsonschema.Schema{Type: "integer"}},
}}

// toolTable is every memory tool, in the order the model is given them.
var toolTable = []ToolSpec{
	Tool[wire.ZoomArgs]{
		Name: wire.ToolZoom,
		Description: "Open part of the chat memory. Each view line starts with <start>+<count>: " +
			"zoom with id=<start> and n=<count> shows the two halves of that line one level down; " +
			"n=1 shows the original entry word for word, with its images, in pages of 25,000 characters " +
			"(offset and limit choose the page). Any aligned block can be opened: n a power of two, id a multiple of n.",
		Summary: "A page of what a summary line stands for, images included (at most 4 MiB of images, 25,000 characters).",
		Call:    (*Memory).zoom,
	}.spec(),
	Tool[wire.DateArgs]{
		Name:        wire.ToolDate,
		Description: "The date and time an entry of the chat was logged.",
		Summary:     "When an entry was logged.",
		Call:        (*Memory).date,
	}.spec(),
	Tool[wire.SearchArgs]{
		Name: wire.ToolSearch,
		Description: "Find original chat entries by their words: pass words or a whole sentence (a question as you would ask it works); " +
			"words match whatever their case and ending (run, runs, running), common words like 'the' are ignored, " +
			"and entries holding more of the rarer words rank first, the entries just before and after a hit with it (an answer often sits beside its question's words); put a phrase in double quotes to require it word for word. " +
			"Summaries and logged results of the memory tools are not searched. Where the server has an embedding model, entries near the query in meaning rank too; " +
			"otherwise only words match, so try other words for the same thing when nothing fits. " +
			"20 hits a page, best first, each with its id (for zoom), date, a snippet and the summary line holding it; pass skip=<n> as the answer says for the next page.",
		Summary: "Search the chat's log (opt-in per chat; a 404 tool result when off).",
		OptIn:   SettingSearch,
		Call:    (*Memory).searchIn,
	}.spec(),
	Tool[wire.ForgetArgs]{
		Name: wire.ToolForget,
		Description: "Erase messages from the chat for good, when the user asks you to forget them: " +
			"their words and images leave the log and every summary built from them is rebuilt without them; it cannot be undone. " +
			"Name the messages by entries (ids as the view and zoom show them: zoom id=<id> n=1 opens one; the whole message holding each entry is erased) " +
			"or by match (every message holding that text, at least 4 characters). Answers the erasure's receipt.",
		Summary:     "Erase messages the model names, as POST .../erase does (opt-in per chat; a 404 tool result when off).",
		OptIn:       SettingForget,
		Destructive: true,
		Call:        (*Memory).forget,
	}.spec(),
}

// ToolTable is every memory tool, the opt-in ones included.
func ToolTable() []ToolSpec { return toolTable }

// ToolDef is a tool definition a host passes to its model.
type ToolDef struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Parameters  *jsonschema.Schema `json:"parameters"`
}

// Tools lists memory's tool definitions; the opt-in ones only when on.
func Tools(on Settings) []ToolDef {
	var defs []ToolDef
	for _, t := range toolTable {
		if on.On(t.OptIn) {
			defs = append(defs, ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	return defs
}

// ToolRoute is the pattern of a tool's route.
func ToolRoute(name string) string { return "POST /v1/chats/{chat}/tools/" + name }

// registerTools adds a route for each tool.
func (m *Memory) registerTools(mux *http.ServeMux) {
	for _, t := range toolTable {
		api.Handle(mux, ToolRoute(t.Name), func(w http.ResponseWriter, r *http.Request) error {
			c, err := m.requestChat(r)
			if err != nil {
				return err
			}
			raw, err := api.ReadBody(r)
			if err != nil {
				return err
			}
			res, err := t.call(m, r.Context(), c, raw)
			if off := (*OffError)(nil); errors.As(err, &off) {
				// A tool result a host can hand its model as it is, with a 404.
				api.WriteJSON(w, http.StatusNotFound, toolError("%s", off.Message()))
				return nil
			}
			if err != nil {
				return err
			}
			api.WriteJSON(w, http.StatusOK, res)
			return nil
		})
	}
}

// CallTool answers the memory tool name with its arguments as JSON, as its
// route does: the scheduler runs first, and bad arguments are a 400.
func (m *Memory) CallTool(ctx context.Context, tenant, chat, name string, args json.RawMessage) (wire.ToolResult, error) {
	for _, t := range toolTable {
		if t.Name != name {
			continue
		}
		c, err := m.current(ctx, tenant, chat)
		if err != nil {
			return wire.ToolResult{}, err
		}
		return t.call(m, ctx, c, args)
	}
	return wire.ToolResult{}, api.NotFound("no memory tool %q", name)
}
