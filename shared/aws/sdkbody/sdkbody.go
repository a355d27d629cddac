// Package sdkbody closes a race between the AWS SDK and net/http that
// loses an answer the service has sent.
//
// The SDK closes a request's body as soon as the answer's headers arrive.
// net/http, having written the Content-Length bytes, looks at the body
// once more to see that it has ended. When the body can write itself
// (io.WriterTo, as the bytes.Reader of a serialized request can), that
// last look is a WriteTo, which the SDK's wrapper answers, once closed,
// with io.EOF as an error; the transport then closes the connection under
// the answer being read, and the call fails with "use of closed network
// connection" after a 200. It takes a server quicker than the client's own
// write loop, as a local emulator or a busy function's host often is. The
// SDK retries it, but every attempt can lose the same race. With the body
// seen as a reader alone, the last look is a Read, which a closed body
// answers with the plain end the transport looks for.
package sdkbody

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ReadOnly, an API option (aws.Config.APIOptions, config.WithAPIOptions),
// sends each request's body without the WriteTo its reader has. It runs
// last before the request is sent, after the signing and after the retry
// step has rewound the body, so each attempt sends the whole body again.
func ReadOnly(stack *middleware.Stack) error {
	return stack.Finalize.Add(readOnly{}, middleware.After)
}

// APIOptions is ReadOnly as a configuration's API options, the form
// aws.Config.APIOptions and config.WithAPIOptions take.
func APIOptions() []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{ReadOnly}
}

// ID names ReadOnly's step in a client's middleware stack.
const ID = "durachat.sdkbody.ReadOnly"

type readOnly struct{}

func (readOnly) ID() string { return ID }

func (readOnly) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	req, ok := in.Request.(*smithyhttp.Request)
	if !ok {
		return next.HandleFinalize(ctx, in)
	}
	stream := req.GetStream()
	if _, ok := stream.(io.WriterTo); !ok {
		return next.HandleFinalize(ctx, in)
	}
	var hidden io.Reader = struct{ io.Reader }{stream}
	if seeker, ok := stream.(io.ReadSeeker); ok {
		hidden = struct{ io.ReadSeeker }{seeker} // its length known as before
	}
	sent, err := req.SetStream(hidden)
	if err != nil {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("sdkbody: sending the request body as a reader: %w", err)
	}
	in.Request = sent
	return next.HandleFinalize(ctx, in)
}
