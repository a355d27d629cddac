package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/durachat/durachat/client/importfile"
)

// Body limits of the deployments (docs/api.md, "Limits"). A body that
// passes the client's limit has its inline images uploaded first (Upload)
// and sent as refs.
const (
	// LambdaBodyLimit is what a request to durachat in AWS may take:
	// Lambda's 6 MiB invocation limit, counted on the body as it travels
	// inside the event (quotes and backslashes escaped), less room for the
	// event's other fields.
	LambdaBodyLimit = 6<<20 - 64<<10
	// LocalBodyLimit is the local server's limit on a body (10 MiB).
	LocalBodyLimit = 10 << 20
	// DefaultBodyLimit is the smaller: a client that does not know its
	// deployment stays within both.
	DefaultBodyLimit = LambdaBodyLimit
)

// WithBodyLimit sets the body size past which the hooks and Append upload
// a request's inline images before sending it (LocalBodyLimit for a
// client of the local server only); 0 or less never uploads.
func WithBodyLimit(n int) Option { return func(c *Client) { c.bodyLimit = n } }

// UploadInput describes an image to upload: its name, byte count, type and
// SHA-256 as hex (Describe computes them).
type UploadInput struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Type   string `json:"type"`
	SHA256 string `json:"sha256"`
}

// Describe computes what UploadTarget needs to know of image bytes: the
// name is the one the image gets inline (the first 16 hex digits of the
// SHA-256 of its standard base64) and the type is read from the bytes.
func Describe(data []byte) UploadInput {
	sum := sha256.Sum256(data)
	return UploadInput{
		Name:   importfile.ImageNameBytes(data),
		Size:   int64(len(data)),
		Type:   http.DetectContentType(data),
		SHA256: hex.EncodeToString(sum[:]),
	}
}

// UploadTarget is where to PUT an image's bytes: the request must carry
// Headers, before Expires.
type UploadTarget struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Expires time.Time         `json:"expires"`
}

// UploadAnswer is the upload route's answer: Stored when the image is
// stored already (Upload is then nil), else the target to PUT it to.
type UploadAnswer struct {
	Name   string        `json:"name"`
	Stored bool          `json:"stored"`
	Upload *UploadTarget `json:"upload"`
}

// UploadTarget asks for a target to upload an image to (POST
// .../uploads). Most callers want Upload, which also sends the bytes.
func (ch *Chat) UploadTarget(ctx context.Context, in UploadInput) (*UploadAnswer, error) {
	var out UploadAnswer
	if err := ch.c.call(ctx, call{method: http.MethodPost, path: ch.path("/uploads"), body: in, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Upload stores image bytes without them passing through a request to
// durachat: it asks for an upload target and PUTs the bytes there (to S3
// in AWS). It returns the image's name, whose ref block ("[image
// <name>]", RefBlock) a host then sends in place of the image; the image
// is checked and stored when a hook or Append first carries the ref. An
// image stored already is not sent again.
func (ch *Chat) Upload(ctx context.Context, data []byte) (string, error) {
	in := Describe(data)
	a, err := ch.UploadTarget(ctx, in)
	if err != nil {
		return "", err
	}
	if a.Stored {
		return a.Name, nil
	}
	if a.Upload == nil {
		return "", fmt.Errorf("durachat: upload %s: the answer has no target", in.Name)
	}
	req, err := http.NewRequestWithContext(ctx, a.Upload.Method, a.Upload.URL, bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("durachat: upload %s: %w", in.Name, err)
	}
	for k, v := range a.Upload.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" { // the body's own
			req.Header.Set(k, v)
		}
	}
	// No Authorization: the target's signature is the credential.
	resp, err := ch.c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("durachat: upload %s: %w", in.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", apiError(resp, body)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return a.Name, nil
}

// RefBlock is the ref block of an image name: what a host sends in place
// of an uploaded image.
func RefBlock(name string) Block { return Text("[image " + name + "]") }

// uploadIfOver uploads the inline images of contents, and puts their ref
// blocks in their place, when body would pass the client's body limit. It
// returns the names uploaded, in block order. contents are the caller's
// copies, changed in place.
func (ch *Chat) uploadIfOver(ctx context.Context, body any, contents ...Content) ([]string, error) {
	limit := ch.c.bodyLimit
	if limit <= 0 {
		return nil, nil
	}
	data, err := marshal(body)
	if err != nil {
		return nil, err
	}
	if travelSize(data) <= limit {
		return nil, nil
	}
	var names []string
	for _, c := range contents {
		for i, b := range c {
			if b.Type != "image" || b.Data == "" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil {
				continue // sent as it is: the server names what is wrong
			}
			name, err := ch.Upload(ctx, raw)
			if err != nil {
				return nil, err
			}
			c[i] = RefBlock(name)
			names = append(names, name)
		}
	}
	return names, nil
}

// travelSize is a JSON body's size inside a Lambda event: as a JSON string,
// each quote and backslash escaped.
func travelSize(body []byte) int {
	n := len(body)
	for _, c := range body {
		if c == '"' || c == '\\' {
			n++
		}
	}
	return n
}
