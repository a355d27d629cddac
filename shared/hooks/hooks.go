// Package hooks serves the image hooks a host calls around its model loop.
//
// after-tool and offload-input move the images of a tool result or a user
// message into the caller's image store and leave ref blocks
// ("[image <name>]") in their place, so whatever the host keeps holds refs,
// never base64. before-request does the reverse on a built provider request
// (pi-ai, Anthropic Messages, Bedrock Converse or OpenAI Chat Completions),
// just before the host sends it to its model.
//
// The namespace is always the authenticated caller's tenant (api.Tenant),
// never a field of the request.
package hooks

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// InlineImage is an image an offload left inline, and why.
type InlineImage struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// Unrestored is a ref before-request left as text, and why.
type Unrestored struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Reasons an image stays inline or a ref stays text.
const (
	// ReasonNotFound: the tenant has no image of that name.
	ReasonNotFound = "not_found"
	// ReasonUnavailable: the image store failed or timed out.
	ReasonUnavailable = "unavailable"
	// ReasonBudget: the inline byte budget was spent and the format takes no URLs.
	ReasonBudget = "budget"
	// ReasonFormat: the format cannot carry an image in that place.
	ReasonFormat = "format"
	// ReasonError: any other failure of the store.
	ReasonError = "error"
)

// marshal encodes v without HTML escaping, so text such as "<chat>" passes
// through as the host wrote it.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// index appends "[i]" to a field path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
