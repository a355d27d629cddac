// Package awsfault tells an AWS outage (throttling, a 5xx answer, a broken
// connection, a timeout) from an error that retrying cannot fix. The AWS
// adapters use it to turn outages into store.ErrUnavailable, which the API
// answers with 503 and Retry-After.
package awsfault

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The SDK's own lists of what it retries: throttling codes, 5xx statuses,
// connection errors, RequestTimeout. Reusing them keeps us in step with it.
var (
	retryables = retry.IsErrorRetryables(retry.DefaultRetryables)
	timeouts   = retry.IsErrorTimeouts(retry.DefaultTimeouts)
	throttles  = retry.IsErrorThrottles(retry.DefaultThrottles)
)

// Transient reports whether err is an outage that may pass: the request may
// succeed if sent again later. A canceled context is not transient: the
// caller gave up. A passed deadline is, since the service did not answer in
// time.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if throttles.IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	if timeouts.IsErrorTimeout(err) == aws.TrueTernary {
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return true
	}
	return retryables.IsErrorRetryable(err) == aws.TrueTernary
}
