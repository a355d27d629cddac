package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Block is a pi-ai content block: text, image, toolCall or thinking. Only
// the fields of its type are set.
type Block struct {
	Type string `json:"type"`
	// Text of a text block. A ref block is a text block whose whole text
	// is one ref, "[image <16 hex digits>]".
	Text string `json:"text,omitempty"`
	// Data (base64) and MimeType of an image block; Name is the name it is
	// stored under, when it came from durachat (zoom, before-request).
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	// Name is also a toolCall's tool name.
	Name string `json:"name,omitempty"`
	// ID and Arguments of a toolCall block.
	ID        string          `json:"id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Thinking of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// URL is a signed link to the image of a ref block, in messages read
	// back with links; it works for minutes.
	URL string `json:"url,omitempty"`
}

// MarshalJSON keeps the text of a text block even when it is empty.
func (b Block) MarshalJSON() ([]byte, error) {
	type plain Block
	if b.Type != "text" || b.Text != "" {
		return json.Marshal(plain(b))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(b), ""})
}

// Content is a message's content blocks. It also decodes pi-ai's string
// content, as one text block.
type Content []Block

func (c *Content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Text joins the text of the text blocks, one per line.
func (c Content) Text() string {
	var parts []string
	for _, b := range c {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Refs lists the names of the content's ref blocks, in order.
func (c Content) Refs() []string {
	var names []string
	for _, b := range c {
		if name, ok := RefName(b); ok {
			names = append(names, name)
		}
	}
	return names
}

var refText = regexp.MustCompile(`^\[image ([0-9a-f]{16})\]$`)

// RefName returns the image name of a ref block: a text block whose whole
// text is "[image <16 hex digits>]".
func RefName(b Block) (string, bool) {
	if b.Type != "text" {
		return "", false
	}
	m := refText.FindStringSubmatch(b.Text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// ToolResult is a pi tool result: what a tool returns, what after-tool
// takes and gives back, and what the memory tools answer.
type ToolResult struct {
	Content Content `json:"content"`
	IsError bool    `json:"isError"`
	// Details is a host's own data about the result, passed through.
	Details json.RawMessage `json:"details,omitempty"`
}

// The memory tools durachat answers, by name.
const (
	ToolZoom   = "zoom"
	ToolDate   = "date"
	ToolSearch = "search"
	ToolForget = "forget"
)

// ZoomArgs are the zoom tool's arguments: the block of N entries starting
// at ID (N left out means 1, one original entry), and for one entry the
// page (Offset and Limit in characters; left out, the defaults). A client
// leaves a field that is 0 out (but ID); the server also takes what a
// model writes (numbers as strings), and tells a field left out from one
// set to 0 (Given).
type ZoomArgs struct {
	ID     int64 `json:"id" jsonschema:"first entry of the block (the number before the + in a view line)"`
	N      int64 `json:"n,omitempty" jsonschema:"block size, a power of two; 1 (the default) opens one original entry"`
	Offset int64 `json:"offset,omitempty" jsonschema:"with n=1: the character to start the page at (default 0)"`
	Limit  int64 `json:"limit,omitempty" jsonschema:"with n=1: the page length in characters (default and most 25000)"`
	given  given
}

func (a *ZoomArgs) UnmarshalJSON(b []byte) error {
	var v struct {
		ID     *number `json:"id"`
		N      *number `json:"n"`
		Offset *number `json:"offset"`
		Limit  *number `json:"limit"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	g := given{}
	*a = ZoomArgs{ID: v.ID.in(g, "id"), N: v.N.in(g, "n"), Offset: v.Offset.in(g, "offset"), Limit: v.Limit.in(g, "limit"), given: g}
	return nil
}

// Given reports whether the arguments give field (by its JSON name), as
// for every tool's arguments: decoded, whether the JSON held it (null is
// left out); made in Go, whether their JSON would.
func (a ZoomArgs) Given(field string) bool { return a.given.has(a, field) }

// DateArgs are the date tool's arguments: the entry whose date is asked.
type DateArgs struct {
	ID    int64 `json:"id" jsonschema:"the entry's id"`
	given given
}

func (a *DateArgs) UnmarshalJSON(b []byte) error {
	var v struct {
		ID *number `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	g := given{}
	*a = DateArgs{ID: v.ID.in(g, "id"), given: g}
	return nil
}

// Given is as ZoomArgs.Given.
func (a DateArgs) Given(field string) bool { return a.given.has(a, field) }

// SearchArgs are the search tool's arguments: the words to find, how many
// ranked hits to skip (for the next page), and optionally the id to search
// before (left out: the whole log).
type SearchArgs struct {
	Text   string `json:"text" jsonschema:"words or a sentence to find; a phrase in double quotes must appear as written"`
	Skip   int64  `json:"skip,omitempty" jsonschema:"the number of ranked hits already read (for the next page)"`
	Before int64  `json:"before,omitempty" jsonschema:"only entries with a smaller id"`
	given  given
}

func (a *SearchArgs) UnmarshalJSON(b []byte) error {
	var v struct {
		Text   *string `json:"text"`
		Skip   *number `json:"skip"`
		Before *number `json:"before"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	g := given{}
	*a = SearchArgs{Skip: v.Skip.in(g, "skip"), Before: v.Before.in(g, "before"), given: g}
	if v.Text != nil {
		a.Text, g["text"] = *v.Text, true
	}
	return nil
}

// Given is as ZoomArgs.Given.
func (a SearchArgs) Given(field string) bool { return a.given.has(a, field) }

// ForgetArgs are the forget tool's arguments: exactly one of Entries
// (entry ids as the view and zoom show them; each erases the whole
// message holding it) or Match (every message holding the text).
type ForgetArgs struct {
	Entries []int64 `json:"entries,omitempty" jsonschema:"ids of entries to forget, as zoom shows them (zoom id=<id> n=1); the whole message holding each is erased"`
	Match   string  `json:"match,omitempty" jsonschema:"forget every message whose text holds this text literally (at least 4 characters)"`
}

// given is the set of fields, by JSON name, that the JSON a tool's
// arguments were decoded from held; nil for arguments made in Go.
type given map[string]bool

// has reports whether field is given in args: in g, or when g is nil
// (args made in Go), in args' JSON.
func (g given) has(args any, field string) bool {
	if g != nil {
		return g[field]
	}
	b, err := json.Marshal(args)
	if err != nil {
		return false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return false
	}
	_, ok := fields[field]
	return ok
}

// number is a whole number of a tool's arguments as a model writes it: a
// JSON number, or a string holding one ("12").
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(strings.TrimSpace(s))
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(b), 64)
		if ferr != nil || f != float64(int64(f)) {
			// The decoder names the field of a type error.
			return &json.UnmarshalTypeError{Value: "value " + string(b), Type: reflect.TypeFor[int64]()}
		}
		v = int64(f)
	}
	*n = number(v)
	return nil
}

// in is n's value, recording name in g as given; 0 for a number left out
// (nil).
func (n *number) in(g given, name string) int64 {
	if n == nil {
		return 0
	}
	g[name] = true
	return int64(*n)
}
