package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/durachat/durachat/client/wire"
)

// Chat is one chat of the caller's tenant: the routes under
// /v1/chats/{chat}. Its id is the host's own, 1-128 of A-Z a-z 0-9 . _ -.
type Chat struct {
	c  *Client
	id string
}

// Chat returns a handle on the chat id. Nothing is sent: a chat exists
// once something is logged in it.
func (c *Client) Chat(id string) *Chat { return &Chat{c: c, id: id} }

// ID is the chat's id.
func (ch *Chat) ID() string { return ch.id }

// path is the escaped route under the chat.
func (ch *Chat) path(route string) string {
	return "/v1/chats/" + url.PathEscape(ch.id) + route
}

// Append logs messages (pi-ai messages: Message values, or anything that
// encodes to one) with POST .../messages and returns the ids of the entries
// logged. Inline images are stored once; the log holds their refs.
//
// receipt (at most 256 bytes) makes the append idempotent: a repeat with
// the same receipt and messages returns the first ids and logs nothing
// twice, and only then is a 503 or a lost answer retried. Derive it from
// what the step is (the turn and its place in the chat), never from a
// clock or a random value, so that a host that sends the step again after
// an error sends the same receipt. The same receipt with other
// messages is a 409 (*Error with Code "conflict", Field "receipt"). With
// an empty receipt the append is still all-or-nothing but never retried.
func (ch *Chat) Append(ctx context.Context, receipt string, messages ...any) ([]int64, error) {
	body := struct {
		Messages []any  `json:"messages"`
		Receipt  string `json:"receipt,omitempty"`
	}{slices.Clone(messages), receipt}
	if body.Messages == nil {
		body.Messages = []any{}
	}
	// Past the client's body limit, the images of Message values are
	// uploaded first and logged as refs (the caller's messages are not
	// changed).
	var contents []Content
	for i, m := range body.Messages {
		var msg Message
		switch v := m.(type) {
		case Message:
			msg = v
		case *Message:
			msg = *v
		default:
			continue
		}
		msg.Content = slices.Clone(msg.Content)
		body.Messages[i] = msg
		contents = append(contents, msg.Content)
	}
	if _, err := ch.uploadIfOver(ctx, body, contents...); err != nil {
		return nil, err
	}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/messages"), body: body, retry: receipt != ""}, &out)
	return out.IDs, err
}

// Wait says how long View waits for the chat's lines to be summarized.
type Wait string

const (
	// NoWait reads the view as it is.
	NoWait Wait = ""
	// WaitTurn waits (at most about 20 s) until the lines are built or
	// their builds have stalled: read it once per turn.
	WaitTurn Wait = "turn"
)

// View reads the memory view with GET .../view.
func (ch *Chat) View(ctx context.Context, wait Wait) (*wire.View, error) {
	var q url.Values
	if wait != NoWait {
		q = url.Values{"wait": {string(wait)}}
	}
	var v wire.View
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/view"), query: q, retry: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ToolDef is a memory tool's definition for the model: its name,
// description and JSON schema of its arguments.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// The memory tools durachat answers.
const (
	ToolZoom   = wire.ToolZoom
	ToolDate   = wire.ToolDate
	ToolSearch = wire.ToolSearch
	ToolForget = wire.ToolForget
)

// Tools lists the memory tools to offer the model (zoom, date, and search
// and forget when they are on) with GET .../tools.
func (ch *Chat) Tools(ctx context.Context) ([]ToolDef, error) {
	var out struct {
		Tools []ToolDef `json:"tools"`
	}
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/tools"), retry: true}, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// CallTool answers a memory tool call (name "zoom", "date" or "search")
// with the model's arguments as they are, with POST .../tools/{name}. The
// result goes to the model like any tool result (through AfterTool first,
// so zoom's images become refs again). A tool error the model should see,
// such as search being off, is a result with IsError set, not an error.
func (ch *Chat) CallTool(ctx context.Context, name string, arguments json.RawMessage) (*ToolResult, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	var r ToolResult
	k := call{method: http.MethodPost, path: ch.path("/tools/" + url.PathEscape(name)), body: arguments, retry: true, accept404: true}
	if err := ch.c.call(ctx, k, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ZoomArgs are the zoom tool's arguments (wire.ZoomArgs): the block of N
// entries starting at ID (N 0 means 1, one original entry), and for one
// entry the page (Offset and Limit in characters; 0 means the defaults).
type ZoomArgs = wire.ZoomArgs

// Zoom opens part of the memory: a view line's two halves, or an original
// entry with its images.
func (ch *Chat) Zoom(ctx context.Context, args ZoomArgs) (*ToolResult, error) {
	return ch.tool(ctx, ToolZoom, args)
}

// Date tells when entry id was logged.
func (ch *Chat) Date(ctx context.Context, id int64) (*ToolResult, error) {
	return ch.tool(ctx, ToolDate, wire.DateArgs{ID: id})
}

// SearchArgs are the search tool's arguments (wire.SearchArgs): the text
// to find, and for the next page of older hits the id to search before (0:
// from the newest).
type SearchArgs = wire.SearchArgs

// Search finds original entries containing a text. With search off for the
// chat the result is a tool error saying how to turn it on.
func (ch *Chat) Search(ctx context.Context, args SearchArgs) (*ToolResult, error) {
	return ch.tool(ctx, ToolSearch, args)
}

func (ch *Chat) tool(ctx context.Context, name string, args any) (*ToolResult, error) {
	raw, err := marshal(args)
	if err != nil {
		return nil, fmt.Errorf("durachat: %s arguments: %w", name, err)
	}
	return ch.CallTool(ctx, name, raw)
}

// Image reads a stored image with GET .../images/{name}: its bytes and
// Content-Type.
func (ch *Chat) Image(ctx context.Context, name string) ([]byte, string, error) {
	k := call{method: http.MethodGet, path: ch.path("/images/" + url.PathEscape(name)), retry: true}
	resp, err := ch.c.send(ctx, k)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, "", fmt.Errorf("durachat: GET %s: reading the image: %w", k.path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", apiError(resp, data)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// Status reads the chat's build counts and last error.
func (ch *Chat) Status(ctx context.Context) (*wire.Status, error) {
	var s wire.Status
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/status"), retry: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// TreePage chooses a page of the tree: a level (nil: the top one), the
// first node's index, and at most Limit nodes (0: the server's default).
type TreePage struct {
	Level *int
	From  int64
	Limit int
}

// Tree reads a page of one level of the chat's summary tree.
func (ch *Chat) Tree(ctx context.Context, p TreePage) (*wire.Tree, error) {
	q := url.Values{}
	if p.Level != nil {
		q.Set("level", strconv.Itoa(*p.Level))
	}
	if p.From > 0 {
		q.Set("from", strconv.FormatInt(p.From, 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	path := ch.path("/tree")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var t wire.Tree
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: path, retry: true}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// MemorySettings are a chat's memory settings.
type MemorySettings struct {
	// Search offers the search tool in this chat.
	Search bool `json:"search"`
}

// SetMemorySettings changes the chat's settings with PUT .../memory/settings
// and returns them as stored.
func (ch *Chat) SetMemorySettings(ctx context.Context, s MemorySettings) (*MemorySettings, error) {
	var out MemorySettings
	if err := ch.c.call(ctx, call{method: http.MethodPut, path: ch.path("/memory/settings"), body: s, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
