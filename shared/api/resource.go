package api

import (
	"net/http"
	"strings"
)

// ResourceMetadataPath is where a client finds the API's OAuth Protected
// Resource Metadata (RFC 9728): the authorization server that issues the
// tokens the API takes. A client of a resource under a path (the MCP
// endpoint, /v1/mcp) asks for this path with the resource's path after it
// first.
const ResourceMetadataPath = "/.well-known/oauth-protected-resource"

// ResourcePath is the resource whose metadata the path-suffixed form
// describes: the MCP endpoint, which MCP clients sign in to.
const ResourcePath = "/v1/mcp"

// bearerChallenge is the challenge of a 401 where only bearer tokens
// exist: no authorization server to sign in with, so it says how to send
// one.
const bearerChallenge = `Bearer realm="durachat", error_description="send the header Authorization: Bearer <token> with a token this server is configured with"`

// Challenger is an Authenticator that tells a refused request how to
// authenticate: the WWW-Authenticate challenge of its 401. An
// Authenticator that is not one answers with bearerChallenge.
type Challenger interface {
	Challenge(r *http.Request) string
}

// ProtectedResource is the API as an OAuth 2.0 protected resource whose
// tokens (JWTs) issuer issues: it serves the resource's metadata
// (Routes, public), and Authenticator wraps auth so that its 401s name
// that metadata. An empty issuer: only bearer tokens exist, there is no
// metadata (its paths are 404) and the 401s say how to send a token.
type ProtectedResource struct {
	Issuer string
}

// Register adds the metadata's two paths: the API's (its resource is the
// API's root), and the MCP endpoint's.
func (p ProtectedResource) Register(mux *http.ServeMux) {
	if p.Issuer == "" {
		return
	}
	for _, path := range []string{"/", ResourcePath} {
		Handle(mux, "GET "+ResourceMetadataPath+strings.TrimSuffix(path, "/"), func(w http.ResponseWriter, r *http.Request) error {
			WriteJSON(w, http.StatusOK, map[string]any{
				"resource":                 Origin(r) + path,
				"resource_name":            "durachat",
				"authorization_servers":    []string{p.Issuer},
				"bearer_methods_supported": []string{"header"},
			})
			return nil
		})
	}
}

// Authenticator is auth whose 401s carry the metadata's URL.
func (p ProtectedResource) Authenticator(auth Authenticator) Authenticator {
	if p.Issuer == "" {
		return auth
	}
	return challenging{auth}
}

type challenging struct{ Authenticator }

// Challenge names the metadata of the resource r asked for: the MCP
// endpoint's under it, the API's for any other path.
func (challenging) Challenge(r *http.Request) string {
	url := Origin(r) + ResourceMetadataPath
	if r.URL.Path == ResourcePath || strings.HasPrefix(r.URL.Path, ResourcePath+"/") {
		url += ResourcePath
	}
	return `Bearer realm="durachat", resource_metadata="` + url + `"`
}

// Origin is the scheme and host the client reached the API at: as
// API Gateway or a proxy in front says (X-Forwarded-Proto), else https
// behind a gateway that does not say (the request's URL names it) or a
// TLS listener; http otherwise. The header comes first: a Lambda
// request's URL says https even behind a local gateway serving http.
func Origin(r *http.Request) string {
	var scheme string
	switch p := r.Header.Get("X-Forwarded-Proto"); {
	case p == "http" || p == "https":
		scheme = p
	case r.URL.Scheme != "":
		scheme = r.URL.Scheme
	case r.TLS != nil:
		scheme = "https"
	default:
		scheme = "http"
	}
	return scheme + "://" + r.Host
}
