package lambdafn_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/config"
)

// In Lambda the MCP endpoint is stateless: a POST is answered alone, as
// JSON, with no session, and the GET stream of a session is refused.
func TestTheMCPEndpointInLambdaAnswersEachPostAloneAsJSON(t *testing.T) {
	mem := functions(t)["memory"]
	rpc := func(method, body string) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RawPath: "/v1/mcp", Body: body,
			Headers: map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream",
				"mcp-protocol-version": "2025-06-18"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "r", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: "/v1/mcp"}},
		}
		resp, _ := mem.send(t, ev)
		return resp
	}
	resp := rpc(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var out struct {
		Result struct {
			Tools []struct{ Name string }
		}
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") || json.Unmarshal([]byte(resp.Body), &out) != nil {
		t.Fatalf("tools/list: %d %v %.300s", resp.StatusCode, resp.Headers, resp.Body)
	}
	if resp.Headers["Mcp-Session-Id"] != "" {
		t.Errorf("a stateless answer named a session %q", resp.Headers["Mcp-Session-Id"])
	}
	var names []string
	for _, tl := range out.Result.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") == "" || !strings.Contains(strings.Join(names, ","), "zoom") {
		t.Fatalf("tools %v", names)
	}
	if resp := rpc(http.MethodGet, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/mcp: %d, want 405", resp.StatusCode)
	}
}

// In Lambda the memory function answers a request at 2026-07-28 alone,
// with no initialize before it: a tools/call carrying its version and the
// client's identity in its _meta.
func TestTheMCPEndpointInLambdaAnswersA20260728CallWithNoInitialize(t *testing.T) {
	mem := functions(t)["memory"]
	const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/mcp",
		Body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"view","arguments":{"chat":"modern"},"_meta":` + meta + `}}`,
		Headers: map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream",
			"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "view"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "r", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/v1/mcp"}},
	}
	resp, _ := mem.send(t, ev)
	var out struct {
		Result struct {
			IsError bool
			Content []struct{ Type string }
		}
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &out) != nil || out.Result.IsError || len(out.Result.Content) == 0 {
		t.Fatalf("tools/call at 2026-07-28: %d %.300s", resp.StatusCode, resp.Body)
	}
	if resp.Headers["Mcp-Session-Id"] != "" {
		t.Errorf("a 2026-07-28 answer named a session %q", resp.Headers["Mcp-Session-Id"])
	}
}

// Where the API takes JWTs, the memory function tells an MCP client where
// to sign in: the MCP endpoint's Protected Resource Metadata names the
// issuer, at the API's domain, and a request the JWT authorizer did not
// vouch for is a 401 naming that metadata.
func TestTheMemoryFunctionTellsAnMCPClientWhereToSignIn(t *testing.T) {
	mem := functionsAuth(t, lambdafn.Auth(config.Config{TenantClaim: "sub", JWTIssuer: testIssuer}, nil))["memory"]
	const domain = "abc123.execute-api.eu-west-1.amazonaws.com"
	get := func(method, path string) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RawPath: path, Headers: map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "r", DomainName: domain,
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}},
		}
		if method == http.MethodPost {
			ev.Body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		}
		resp, _ := mem.send(t, ev)
		return resp
	}
	resp := get(http.MethodGet, "/.well-known/oauth-protected-resource/v1/mcp")
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &md) != nil ||
		md.Resource != "https://"+domain+"/v1/mcp" || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != testIssuer {
		t.Fatalf("the MCP endpoint's metadata: %d %s", resp.StatusCode, resp.Body)
	}
	resp = get(http.MethodPost, "/v1/mcp")
	want := `Bearer realm="durachat", resource_metadata="https://` + domain + `/.well-known/oauth-protected-resource/v1/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Headers["Www-Authenticate"] != want {
		t.Fatalf("POST /v1/mcp without a JWT: %d %v, want 401 with %s", resp.StatusCode, resp.Headers, want)
	}
}
