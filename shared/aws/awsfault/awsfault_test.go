package awsfault_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/durachat/durachat/shared/aws/awsfault"
)

// answered is an API error as the SDK returns it: the code inside an HTTP
// response error carrying the status.
func answered(status int, code string) error {
	return &smithy.OperationError{
		ServiceID:     "DynamoDB",
		OperationName: "PutItem",
		Err: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "m"},
		},
	}
}

func TestTransientTellsOutagesFromLastingErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Throttling", answered(400, "ThrottlingException"), true},
		{"ProvisionedThroughputExceeded", answered(400, "ProvisionedThroughputExceededException"), true},
		{"RequestLimitExceeded", answered(400, "RequestLimitExceeded"), true},
		{"S3SlowDown", answered(503, "SlowDown"), true},
		{"InternalServerError", answered(500, "InternalServerError"), true},
		{"AnyFiveHundred", answered(599, "Whatever"), true},
		{"TooManyRequests", answered(429, ""), true},
		{"ConnectionRefused", fmt.Errorf("send: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{"DeadlinePassed", fmt.Errorf("wait: %w", context.DeadlineExceeded), true},
		{"CallerCanceled", fmt.Errorf("wait: %w", context.Canceled), false},
		{"Validation", answered(400, "ValidationException"), false},
		{"ConditionalCheckFailed", answered(400, "ConditionalCheckFailedException"), false},
		{"NotFound", answered(404, "NoSuchKey"), false},
		{"AccessDenied", answered(403, "AccessDenied"), false},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := awsfault.Transient(tt.err); got != tt.want {
				t.Fatalf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
