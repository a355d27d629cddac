package compactor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/textcut"
)

// A host can write lines with its own code instead of a model: an HTTP
// endpoint or a Lambda function gets each node as CustomRequest and
// answers CustomReply. Answering the source unchanged keeps the message
// word for word.

// CustomRequest is what a custom compactor receives.
type CustomRequest struct {
	// Task is the instruction a model would get (with the byte limit).
	Task   string `json:"task"`
	Source string `json:"source"`
	// Images are the leaf's stored images as named, never null; empty for
	// merges. Data is base64 in JSON.
	Images  []CustomImage `json:"images"`
	Level   int           `json:"level"`
	Index   int64         `json:"index"`
	Label   string        `json:"label"`
	Kind    string        `json:"kind"`
	Context string        `json:"context"`
	// Describe names the images of Images that have no description yet,
	// never null: a compactor may answer one for each (Descriptions).
	Describe []string `json:"describe"`
}

// CustomImage is one image of a CustomRequest.
type CustomImage struct {
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

// CustomReply is what a custom compactor answers.
type CustomReply struct {
	Line *string `json:"line"`
	// Descriptions, optional, describe images named in Describe, by name,
	// for a reader who cannot see them; others are ignored.
	Descriptions map[string]string `json:"descriptions"`
}

// maxReply bounds a custom compactor's answer.
const maxReply = 1 << 20

// errNoLine: the answer has no line.
var errNoLine = errors.New(`the answer has no "line"`)

// custom is what both custom compactors share: building the request and
// reading the answer.
type custom struct {
	name  string
	limit int
	call  func(ctx context.Context, payload []byte) ([]byte, error)
}

func (c custom) compact(ctx context.Context, in memory.CompactRequest) (memory.Compacted, error) {
	limit := c.limit
	if limit <= 0 || limit > MaxLimit {
		limit = DefaultLimit
	}
	out := memory.Compacted{Model: c.name, Attached: len(in.Images)}
	if len(in.Images) == 0 && len(in.Source) <= limit {
		out.Line, out.Verbatim = in.Source, true
		return out, nil
	}
	req := customRequest(in, limit)
	payload, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("compactor: %s: node %s: %w", c.name, in.Label, err)
	}
	out.Attempts = 1
	body, err := c.call(ctx, payload)
	if err != nil {
		return out, fmt.Errorf("compactor: %s: node %s: %w", c.name, in.Label, model.Classify(err))
	}
	var rep CustomReply
	if err := json.Unmarshal(body, &rep); err != nil || rep.Line == nil {
		if err == nil {
			err = errNoLine
		}
		// A malformed answer is the compactor's fault, not a verdict on
		// this node: retry until it is fixed rather than count a refusal.
		return out, fmt.Errorf("compactor: %s: node %s: %w", c.name, in.Label, &model.Error{Retryable: true, Err: err})
	}
	readDescriptions(&out, req.Describe, rep.Descriptions)
	if *rep.Line == in.Source {
		out.Line, out.Verbatim = in.Source, true
		return out, nil
	}
	line := clean(*rep.Line)
	if line == "" {
		return out, fmt.Errorf("compactor: %s: node %s: %w", c.name, in.Label, &model.Error{Retryable: true, Err: errors.New("the line is empty")})
	}
	out.Line = textcut.Head(line, limit)
	return out, nil
}

// customRequest is the request a custom compactor gets for in: a leaf's
// images and the descriptions asked of them come with it.
func customRequest(in memory.CompactRequest, limit int) CustomRequest {
	req := CustomRequest{
		Source: in.Source, Images: make([]CustomImage, 0, len(in.Images)), Describe: []string{},
		Level: in.Level, Index: in.Index, Label: in.Label, Kind: in.Kind, Context: in.Context,
	}
	mode := noImages
	if in.Level == 0 && len(in.Images) > 0 {
		mode = withImages
		for _, img := range in.Images {
			req.Images = append(req.Images, CustomImage{Name: img.Name, MimeType: img.MimeType, Data: img.Data})
		}
		req.Describe = append(req.Describe, in.Describe...)
	}
	if in.Level == 0 {
		req.Task = leafTask(in, limit, mode, nil)
	} else {
		a, b := childLabels(in.Level, in.Index)
		req.Task = mergeTask(a, b, in.Label, in.Source, limit)
	}
	return req
}

// readDescriptions keeps the descriptions answered for the images asked
// of, when the compactor answers any: one that never does is not counted
// as failing to describe. An empty one is none: the image waits for
// another leaf.
func readDescriptions(out *memory.Compacted, asked []string, answered map[string]string) {
	if answered == nil || len(asked) == 0 {
		return
	}
	out.DescribeAsked = len(asked)
	out.Descriptions = map[string]string{}
	for _, name := range asked {
		if d := images.CleanDescription(answered[name]); d != "" {
			out.Descriptions[name] = d
		}
	}
}

// HTTPCompactor posts each node as JSON (CustomRequest) to URL and reads
// a CustomReply. 429 and 5xx answers and transport failures are retryable;
// other statuses are not.
type HTTPCompactor struct {
	URL string
	// Client defaults to a client with a 2-minute timeout.
	Client *http.Client
	// Limit is the most bytes of a line: 0 means 512.
	Limit int
	// Header is added to every request (e.g. an authorization).
	Header http.Header
}

var _ memory.Compactor = (*HTTPCompactor)(nil)

// Compact implements memory.Compactor.
func (h *HTTPCompactor) Compact(ctx context.Context, in memory.CompactRequest) (memory.Compacted, error) {
	return custom{name: "http:" + h.URL, limit: h.Limit, call: h.post}.compact(ctx, in)
}

func (h *HTTPCompactor) post(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, &model.Error{Err: err}
	}
	for k, vs := range h.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	client := h.Client
	if client == nil {
		// Connections are pooled by the default transport, not the client.
		client = &http.Client{Timeout: defaultCustomTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, model.TransportError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return nil, model.TransportError(err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, model.StatusError(resp.StatusCode, fmt.Errorf("POST %s: %s: %s", h.URL, resp.Status, snippet(body)))
	}
	if len(body) > maxReply {
		return nil, &model.Error{Err: fmt.Errorf("POST %s: answer over %d bytes", h.URL, maxReply)}
	}
	return body, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	return textcut.Head(s, 200)
}
