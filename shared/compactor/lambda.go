package compactor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
)

// defaultCustomTimeout bounds one custom compactor call.
const defaultCustomTimeout = 2 * time.Minute

// Invoker runs a Lambda function synchronously with a JSON payload and
// returns its JSON result. A function error is an error.
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) ([]byte, error)
}

// LambdaCompactor invokes a Lambda function with each node as JSON
// (CustomRequest) and reads a CustomReply from its result.
type LambdaCompactor struct {
	// Function is the function's name or ARN (a qualifier may follow ':').
	Function string
	Invoker  Invoker
	// Limit is the most bytes of a line: 0 means 512.
	Limit int
}

var _ memory.Compactor = (*LambdaCompactor)(nil)

// Compact implements memory.Compactor.
func (l *LambdaCompactor) Compact(ctx context.Context, in memory.CompactRequest) (memory.Compacted, error) {
	call := func(ctx context.Context, payload []byte) ([]byte, error) {
		return l.Invoker.Invoke(ctx, l.Function, payload)
	}
	return custom{name: "lambda:" + l.Function, limit: l.Limit, call: call}.compact(ctx, in)
}

// LambdaInvoker runs a function through the AWS SDK's Lambda client.
type LambdaInvoker struct {
	Client *lambda.Client
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
	name, qualifier, _ := strings.Cut(function, ":")
	in := &lambda.InvokeInput{FunctionName: aws.String(name), Payload: payload, InvocationType: lambdatypes.InvocationTypeRequestResponse}
	if strings.HasPrefix(function, "arn:") {
		in.FunctionName = aws.String(function)
	} else if qualifier != "" {
		in.Qualifier = aws.String(qualifier)
	}
	out, err := l.Client.Invoke(ctx, in)
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			return nil, model.StatusError(re.HTTPStatusCode(), fmt.Errorf("lambda %s: %w", function, err))
		}
		return nil, model.TransportError(fmt.Errorf("lambda %s: %w", function, err))
	}
	if fe := aws.ToString(out.FunctionError); fe != "" {
		return nil, &model.Error{Retryable: fe == "Unhandled", Status: int(out.StatusCode),
			Err: fmt.Errorf("lambda %s: %w (%s): %s", function, errFunction, fe, snippet(out.Payload))}
	}
	if len(out.Payload) > maxReply {
		return nil, &model.Error{Err: fmt.Errorf("lambda %s: result over %d bytes", function, maxReply)}
	}
	return out.Payload, nil
}
