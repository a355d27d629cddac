package api

import (
	_ "embed"
	"net/http"
)

// OpenAPIPattern is the route of the API's OpenAPI description; like the
// health check it needs no credentials (it tells nothing of any tenant).
const OpenAPIPattern = "GET /v1/openapi.json"

// OpenAPI is the OpenAPI 3.1 description of the v1 API, every route of
// every function. Tests validate the requests and answers of the server's
// own HTTP tests against it, so it follows the handlers.
//
//go:embed openapi.json
var OpenAPI []byte

// serveOpenAPI answers GET /v1/openapi.json with the embedded document.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, err := w.Write(OpenAPI)
	return err
}
