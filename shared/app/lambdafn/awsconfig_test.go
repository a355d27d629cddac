package lambdafn_test

import (
	"context"
	"testing"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/aws/sdkbody"
)

func TestEveryFunctionsAWSClientsSendBodiesAsReaders(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, err := lambdafn.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stack := middleware.NewStack("op", smithyhttp.NewStackRequest)
	for _, apply := range cfg.APIOptions {
		if err := apply(stack); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := stack.Finalize.Get(sdkbody.ID); !ok {
		t.Fatalf("the functions' AWS configuration does not add %s: an answer can be lost under a body the SDK closed (package sdkbody)", sdkbody.ID)
	}
}
