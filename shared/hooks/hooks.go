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
	"net/http"
	"strconv"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
)

// InlineImage is an image an offload left inline, and why.
type InlineImage struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// Unrestored is a ref before-request left as text, and why.
type Unrestored = wire.Unrestored

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
	// ReasonError: any other failure of the store (or stored bytes that
	// are not an image).
	ReasonError = "error"
	// ReasonDescribe: mode "describe" sends every image as its description.
	ReasonDescribe = "describe"
	// ReasonLimit: the request already carries as many images as its
	// provider takes.
	ReasonLimit = "limit"
)

// index appends "[i]" to a field path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// writeAnswer answers 200 with the object rest encodes, plus key holding
// the node, written once from one buffer sized for it: each image's base64
// is encoded straight into it (rawjson.Base64), and nothing is copied
// twice or scanned again.
func writeAnswer(w http.ResponseWriter, key string, node rawjson.Node, rest any) error {
	tail, err := rawjson.Of(rest)
	if err != nil {
		return err
	}
	answer := make([]byte, 0, len(key)+8+node.Len()+len(tail)+1)
	answer = append(rawjson.AppendKey(append(answer, '{'), key), ':')
	answer = node.AppendTo(answer)
	if len(tail) > 2 {
		answer = append(append(answer, ','), tail[1:]...)
	} else {
		answer = append(answer, '}')
	}
	answer = append(answer, '\n')
	api.SetDataHeaders(w.Header(), "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(answer) // an error is the client gone: nothing left to answer
	return nil
}
