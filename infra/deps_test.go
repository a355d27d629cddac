package infra

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/config"
)

// Import path prefixes of the SDKs a function may only link when its
// routes call them.
const (
	dynamoSDK    = "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqsSDK       = "github.com/aws/aws-sdk-go-v2/service/sqs"
	bedrockSDK   = "github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	lambdaSDK    = "github.com/aws/aws-sdk-go-v2/service/lambda"
	anthropicSDK = "github.com/anthropics/anthropic-sdk-go"
	openaiSDK    = "github.com/openai/openai-go"
)

var modelSDKs = []string{anthropicSDK, openaiSDK, bedrockSDK, lambdaSDK}

// TestFunctionsLinkOnlyWhatTheirRoutesUse: a function's bootstrap carries
// the SDKs its routes call and no others, so it stays small and starts
// fast. restore touches only S3; offload S3 and the table (the references
// of the images it stores); memory serves and schedules but calls no
// model.
func TestFunctionsLinkOnlyWhatTheirRoutesUse(t *testing.T) {
	forbidden := map[config.Program][]string{
		config.Restore: append([]string{dynamoSDK, sqsSDK}, modelSDKs...),
		config.Offload: append([]string{sqsSDK}, modelSDKs...),
		config.Memory:  modelSDKs,
	}
	for _, p := range config.Functions() {
		deps := functionDeps(t, p)
		if !slices.Contains(deps, "github.com/aws/aws-lambda-go/lambda") {
			t.Errorf("%s: the dependency list is not a Lambda function's: %d packages", p, len(deps))
		}
		for _, pkg := range deps {
			for _, sdk := range forbidden[p] {
				if pkg == sdk || strings.HasPrefix(pkg, sdk+"/") {
					t.Errorf("%s links %s, which none of its routes calls", p, pkg)
				}
			}
		}
	}
}

// functionDeps lists the packages functions/<p> links, as the Makefile
// builds it (arm64 Linux, lambda.norpc).
func functionDeps(t *testing.T, p config.Program) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "./functions/"+string(p))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./functions/%s: %v", p, err)
	}
	return strings.Fields(string(out))
}
