package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Where the API takes JWTs it is an OAuth protected resource (RFC 9728):
// its metadata, at the well-known path and at that path suffixed with the
// MCP endpoint's, names the issuer as the authorization server, with the
// resource the client reached; a 401 names the metadata of the resource
// it refused (the MCP endpoint's, or the API's). Where only bearer tokens
// exist there is no metadata (404), and a 401 says how to send a token.
func TestTheAPITellsAClientWhereToSignInOrHowToSendAToken(t *testing.T) {
	const issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Pool"
	tokens := BearerTokens(map[string]string{"tok-0123456789": "alice"})
	jwt := ProtectedResource{Issuer: issuer}
	mcp := RegisterFunc(func(mux *http.ServeMux) { mux.HandleFunc(ResourcePath, func(http.ResponseWriter, *http.Request) {}) })
	withJWT, _ := newTestHandler(t, Options{Auth: jwt.Authenticator(tokens), Public: []Routes{jwt}, Routes: []Routes{mcp}})
	bearerOnly, _ := newTestHandler(t, Options{Auth: tokens, Public: []Routes{ProtectedResource{}}, Routes: []Routes{mcp}})

	for _, c := range []struct {
		name      string
		h         http.Handler
		path      string
		status    int
		resource  string
		challenge string
	}{
		{"the MCP endpoint's metadata", withJWT, "/.well-known/oauth-protected-resource/v1/mcp", 200, "https://api.example.com/v1/mcp", ""},
		{"the API's metadata", withJWT, "/.well-known/oauth-protected-resource", 200, "https://api.example.com/", ""},
		{"a 401 of the MCP endpoint", withJWT, "/v1/mcp", 401, "",
			`Bearer realm="durachat", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/v1/mcp"`},
		{"a 401 of another route", withJWT, "/v1/chats/c/whoami", 401, "",
			`Bearer realm="durachat", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource"`},
		{"no metadata with bearer tokens alone", bearerOnly, "/.well-known/oauth-protected-resource/v1/mcp", 404, "", ""},
		{"no metadata of the API either", bearerOnly, "/.well-known/oauth-protected-resource", 404, "", ""},
		{"a 401 with bearer tokens alone", bearerOnly, "/v1/mcp", 401, "", bearerChallenge},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, c.path, nil)
			req.Host = "api.example.com"
			req.Header.Set("X-Forwarded-Proto", "https")
			rec := httptest.NewRecorder()
			c.h.ServeHTTP(rec, req)
			if rec.Code != c.status || rec.Header().Get("WWW-Authenticate") != c.challenge {
				t.Fatalf("%d %q, want %d %q; %s", rec.Code, rec.Header().Get("WWW-Authenticate"), c.status, c.challenge, rec.Body)
			}
			if c.status != http.StatusOK {
				return
			}
			var md struct {
				Resource               string   `json:"resource"`
				AuthorizationServers   []string `json:"authorization_servers"`
				BearerMethodsSupported []string `json:"bearer_methods_supported"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil || md.Resource != c.resource ||
				len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer ||
				len(md.BearerMethodsSupported) != 1 || md.BearerMethodsSupported[0] != "header" {
				t.Fatalf("metadata %s, want resource %s and the issuer", rec.Body, c.resource)
			}
		})
	}
}

// The origin in the metadata is the one the client reached: the scheme a
// gateway or proxy names in X-Forwarded-Proto comes before the https of a
// Lambda request's URL (which says https whatever the gateway serves),
// and without either a plain listener is http, a TLS one https.
func TestTheOriginIsTheSchemeTheGatewayNames(t *testing.T) {
	for _, c := range []struct {
		name, url, forwarded, want string
	}{
		{"a local gateway serving http", "https://127.0.0.1:8080/v1/mcp", "http", "http://127.0.0.1:8080"},
		{"API Gateway", "https://abc.execute-api.eu-west-1.amazonaws.com/v1/mcp", "https", "https://abc.execute-api.eu-west-1.amazonaws.com"},
		{"a Lambda request without the header", "https://abc.example.com/v1/mcp", "", "https://abc.example.com"},
		{"a plain listener", "/v1/mcp", "", "http://example.com"},
		{"an unknown scheme named", "/v1/mcp", "gopher", "http://example.com"},
	} {
		req := httptest.NewRequest(http.MethodGet, c.url, nil)
		if c.forwarded != "" {
			req.Header.Set("X-Forwarded-Proto", c.forwarded)
		}
		if got := Origin(req); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
