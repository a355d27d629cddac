package compactor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
)

// defaultCustomTimeout bounds one custom compressor call.
const defaultCustomTimeout = 2 * time.Minute

// Invoker runs a Lambda function synchronously with a JSON payload and
// returns its JSON result. A function error is an error.
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) ([]byte, error)
}

// LambdaCompressor invokes a Lambda function with each node as JSON
// (CustomRequest) and reads a CustomReply from its result.
type LambdaCompressor struct {
	// Function is the function's name or ARN (a qualifier may follow ':').
	Function string
	Invoker  Invoker
	// Limit is the most bytes of a line: 0 means 512.
	Limit int
}

var _ memory.Compressor = (*LambdaCompressor)(nil)

// Compress implements memory.Compressor.
func (l *LambdaCompressor) Compress(ctx context.Context, in memory.Compression) (memory.Compressed, error) {
	call := func(ctx context.Context, payload []byte) ([]byte, error) {
		return l.Invoker.Invoke(ctx, l.Function, payload)
	}
	return custom{name: "lambda:" + l.Function, limit: l.Limit, call: call}.compress(ctx, in)
}

// LambdaInvoker calls the Lambda Invoke API over HTTPS, signed with
// Signature Version 4 from an AWS configuration. It speaks the API
// directly so that no further SDK service module is needed.
type LambdaInvoker struct {
	Config aws.Config
	// Endpoint replaces the regional endpoint (a local emulator); by
	// default Config.BaseEndpoint, else the region's public endpoint.
	Endpoint string
	// Client defaults to a client with a 2-minute timeout.
	Client *http.Client
}

var _ Invoker = (*LambdaInvoker)(nil)

// errFunction: the function ran and failed.
var errFunction = errors.New("the function failed")

// Invoke runs function with payload (RequestResponse) and returns its result.
// Throttling, server errors, transport failures and unhandled function
// errors (a crash, a timeout) are retryable; bad requests, missing
// functions, denied access and handled function errors are not.
func (l *LambdaInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, error) {
	if function == "" {
		return nil, &model.Error{Err: errors.New("lambda: no function name")}
	}
	endpoint, err := l.endpoint()
	if err != nil {
		return nil, &model.Error{Err: err}
	}
	target := endpoint + "/2015-03-31/functions/" + url.PathEscape(function) + "/invocations"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return nil, &model.Error{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amz-Invocation-Type", "RequestResponse")
	if l.Config.Credentials == nil {
		return nil, &model.Error{Err: errors.New("lambda: no AWS credentials configured")}
	}
	creds, err := l.Config.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, model.TransportError(fmt.Errorf("lambda: credentials: %w", err))
	}
	sum := sha256.Sum256(payload)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", l.Config.Region, time.Now()); err != nil {
		return nil, &model.Error{Err: fmt.Errorf("lambda: signing: %w", err)}
	}
	client := l.Client
	if client == nil {
		client = defaultHTTPClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, model.TransportError(fmt.Errorf("lambda %s: %w", function, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return nil, model.TransportError(fmt.Errorf("lambda %s: reading the result: %w", function, err))
	}
	if resp.StatusCode/100 != 2 {
		kind, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":")
		return nil, model.StatusError(resp.StatusCode, fmt.Errorf("lambda %s: %s %s: %s", function, resp.Status, kind, snippet(body)))
	}
	if fe := resp.Header.Get("X-Amz-Function-Error"); fe != "" {
		return nil, &model.Error{Retryable: fe == "Unhandled", Status: resp.StatusCode,
			Err: fmt.Errorf("lambda %s: %w (%s): %s", function, errFunction, fe, snippet(body))}
	}
	if len(body) > maxReply {
		return nil, &model.Error{Err: fmt.Errorf("lambda %s: result over %d bytes", function, maxReply)}
	}
	return body, nil
}

func (l *LambdaInvoker) endpoint() (string, error) {
	switch {
	case l.Endpoint != "":
		return strings.TrimRight(l.Endpoint, "/"), nil
	case l.Config.BaseEndpoint != nil && *l.Config.BaseEndpoint != "":
		return strings.TrimRight(*l.Config.BaseEndpoint, "/"), nil
	case l.Config.Region == "":
		return "", errors.New("lambda: no region configured")
	case strings.HasPrefix(l.Config.Region, "cn-"):
		return "https://lambda." + l.Config.Region + ".amazonaws.com.cn", nil
	}
	return "https://lambda." + l.Config.Region + ".amazonaws.com", nil
}
