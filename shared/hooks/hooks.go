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
	"net/http"
	"strconv"

	"github.com/durachat/durachat/shared/api"
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

// index appends "[i]" to a field path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// jsonString decodes a raw JSON string. Base64 and most text hold no escapes,
// and then the bytes between the quotes are the string: no second scan.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// The request bodies the hooks answer with are mostly the request they got,
// already decoded and checked. These writers join raw values as they are,
// where json.Marshal would scan every byte of them again.

// joinObject writes an object of raw values, keys sorted.
func joinObject(fields map[string]json.RawMessage) json.RawMessage {
	return encode(&rawObject{fields: fields})
}

// appendKey appends a JSON object key (Go's quoting is not JSON's).
func appendKey(out []byte, k string) []byte {
	q, _ := api.Marshal(k) // a string always encodes
	return append(out, q...)
}

// joinArray writes an array of raw values.
func joinArray(items []json.RawMessage) json.RawMessage {
	return encode(&rawList{items: items})
}

// writeAnswer answers 200 with the object rest encodes, plus key holding raw,
// written without copying or scanning raw.
func writeAnswer(w http.ResponseWriter, key string, raw json.RawMessage, rest any) error {
	tail, err := api.Marshal(rest)
	if err != nil {
		return err
	}
	head := appendKey([]byte("{"), key)
	head = append(head, ':')
	if len(tail) > 2 {
		tail[0] = ','
	} else {
		tail = []byte("}")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for _, part := range [][]byte{head, raw, tail, []byte("\n")} {
		if _, err := w.Write(part); err != nil {
			return nil // the client is gone; nothing left to answer
		}
	}
	return nil
}
