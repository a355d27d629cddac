package memoryapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/mcp"
	"github.com/durachat/durachat/shared/mcp/mcptest"
	"github.com/durachat/durachat/shared/memory"
)

// mcpOnly are the MCP server's own tools: a host that calls the HTTP API
// reads the view (GET .../view) and logs (POST .../messages) by routes of
// their own, and the model is given neither.
var mcpOnly = []string{"view", "log"}

// TestEveryMemoryToolIsOnEverySurface: a memory tool is reachable through
// each surface or through none: its HTTP route, the model's tool list, the
// MCP server's tools/list, the OpenAPI document's paths and tool list, the
// TypeScript client's types (generated from that document, and the
// argument type types.ts names by the tool's operation), and the pi
// extension's list of the tools durachat answers.
func TestEveryMemoryToolIsOnEverySurface(t *testing.T) {
	surfaces := map[string][]string{
		"the model's tool list": names(memory.Tools(memory.AllOn), func(d memory.ToolDef) string { return d.Name }),
		"MCP tools/list":        mcpTools(t),
	}
	doc := string(api.OpenAPI)
	ts := readFile(t, "../../../clients/ts/src/openapi.ts")
	types := readFile(t, "../../../clients/ts/src/types.ts")
	surfaces["OpenAPI paths"] = matches(doc, `"/v1/chats/\{chat\}/tools/([a-z]+)"`)
	surfaces["OpenAPI tool list"] = matches(regexp.MustCompile(`(?s)"operationId": "tools".*?"enum": \[(.*?)\]`).FindStringSubmatch(doc)[1], `"([a-z]+)"`)
	surfaces["TypeScript paths"] = matches(ts, `"/v1/chats/\{chat\}/tools/([a-z]+)"`)
	surfaces["TypeScript argument types"] = matches(types, `RequestBody<"([a-z]+)">`)
	pi := readFile(t, "../../../clients/pi/src/index.ts")
	surfaces["the pi extension's memoryTools"] = matches(regexp.MustCompile(`memoryTools = \[(.*?)\]`).FindStringSubmatch(pi)[1], `"([a-z]+)"`)
	all := map[string]bool{}
	for _, names := range surfaces {
		for _, n := range names {
			all[n] = true
		}
	}
	for n := range all {
		if !httpRoute(n) {
			t.Errorf("tool %s has no HTTP route", n)
		}
		for surface, names := range surfaces {
			if !slices.Contains(names, n) {
				t.Errorf("tool %s is not in %s", n, surface)
			}
		}
	}
	if len(all) == 0 {
		t.Fatal("no surface has a memory tool")
	}
}

// mcpTools are the memory tools the MCP server lists: all but its own.
func mcpTools(t *testing.T) []string {
	s, err := mcp.NewServer((&memoryapi.API{}).MCP("t"), mcp.Options{OptIn: true})
	if err != nil {
		t.Fatal(err)
	}
	list, err := mcptest.InMemory(t, s.SDK()).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range list.Tools {
		if !slices.Contains(mcpOnly, tl.Name) {
			out = append(out, tl.Name)
		}
	}
	return out
}

// httpRoute reports whether memory's routes have one for the tool name.
func httpRoute(name string) bool {
	mux := http.NewServeMux()
	var m *memory.Memory // Register only names the handlers
	m.Register(mux)
	_, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, "/v1/chats/c/tools/"+name, nil))
	return pattern == memory.ToolRoute(name)
}

func matches(text, pattern string) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func names[T any](items []T, name func(T) string) []string {
	var out []string
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}
