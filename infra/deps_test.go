package infra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	// The bearer tokens' stores: only the functions that serve requests.
	secretsSDK = "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	ssmSDK     = "github.com/aws/aws-sdk-go-v2/service/ssm"
)

var modelSDKs = []string{anthropicSDK, openaiSDK, bedrockSDK, lambdaSDK}

// TestFunctionsLinkOnlyWhatTheirRoutesUse: a function's bootstrap carries
// the SDKs its routes call and no others, so it stays small and starts
// fast. restore touches S3 and the table (which images the chat names);
// offload S3 and the table (the references of the images it stores); memory serves and schedules but calls no
// model but Bedrock's embedding model (search by meaning embeds its
// queries); compaction serves no request, so it reads no bearer tokens.
func TestFunctionsLinkOnlyWhatTheirRoutesUse(t *testing.T) {
	forbidden := map[config.Program][]string{
		config.Restore: append([]string{sqsSDK}, modelSDKs...),
		config.Offload: append([]string{sqsSDK}, modelSDKs...),
		config.Memory:  {anthropicSDK, openaiSDK, lambdaSDK},
		config.Compact: {secretsSDK, ssmSDK},
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

// sdkActions maps each SDK operation the adapters may call, by service
// package, to the IAM action it needs. (A presigned request is made by
// whoever holds the URL, with the signer's permissions; a HEAD is a read.)
var sdkActions = map[string]map[string]string{
	"dynamodb": {"GetItem": "dynamodb:GetItem", "PutItem": "dynamodb:PutItem", "UpdateItem": "dynamodb:UpdateItem",
		"DeleteItem": "dynamodb:DeleteItem", "Query": "dynamodb:Query", "Scan": "dynamodb:Scan",
		"BatchGetItem": "dynamodb:BatchGetItem", "BatchWriteItem": "dynamodb:BatchWriteItem",
		"TransactWriteItems": "dynamodb:TransactWriteItems", "TransactGetItems": "dynamodb:TransactGetItems"},
	"s3": {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "PresignGetObject": "s3:GetObject",
		"PutObject": "s3:PutObject", "PresignPutObject": "s3:PutObject", "CopyObject": "s3:PutObject",
		"DeleteObject": "s3:DeleteObject", "DeleteObjects": "s3:DeleteObject", "ListObjectsV2": "s3:ListBucket"},
	"sqs": {"SendMessage": "sqs:SendMessage", "SendMessageBatch": "sqs:SendMessage", "ReceiveMessage": "sqs:ReceiveMessage",
		"DeleteMessage": "sqs:DeleteMessage", "DeleteMessageBatch": "sqs:DeleteMessage",
		"ChangeMessageVisibility": "sqs:ChangeMessageVisibility", "GetQueueAttributes": "sqs:GetQueueAttributes"},
	"bedrockruntime": {"Converse": "bedrock:InvokeModel", "InvokeModel": "bedrock:InvokeModel"},
	"lambda":         {"Invoke": "lambda:InvokeFunction"},
	"secretsmanager": {"GetSecretValue": "secretsmanager:GetSecretValue"},
	"ssm":            {"GetParameter": "ssm:GetParameter"},
}

// neededBesidesCalls are actions a function needs that no call of its code
// makes: Lambda's SQS poller receives, deletes and reads the queue's
// attributes with the compact function's role, and S3 answers a read of a
// missing object with 404 only to a caller that may list the bucket.
var neededBesidesCalls = map[string][]string{
	"CompactFunction": {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
}

// calledActions is every IAM action the SDK calls in the durachat packages
// functions/<p> links would need: each file that imports an AWS service
// package is read for calls of that service's operations.
func calledActions(t *testing.T, p config.Program) map[string]bool {
	t.Helper()
	const module = "github.com/durachat/durachat/"
	actions := map[string]bool{}
	fset := token.NewFileSet()
	for _, pkg := range functionDeps(t, p) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		files, err := filepath.Glob(filepath.Join("..", rel, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			var services []string
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if svc, ok := strings.CutPrefix(path, "github.com/aws/aws-sdk-go-v2/service/"); ok && !strings.Contains(svc, "/") {
					services = append(services, svc)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				for _, svc := range services {
					if a, ok := sdkActions[svc][sel.Sel.Name]; ok {
						actions[a] = true
					}
				}
				return true
			})
		}
	}
	return actions
}

// TestEveryGrantedActionIsCalledByTheCode: a function's policy grants no
// action its code never needs (an action nothing calls is a grant an
// attacker could use and nobody would miss). The other direction, that it
// may do no more than its routes need where its packages could, is
// allowed in template_test.go.
func TestEveryGrantedActionIsCalledByTheCode(t *testing.T) {
	for _, params := range []map[string]any{defaults, allOptions} {
		s := load(t, params)
		for name, p := range functions {
			called := calledActions(t, p)
			for _, a := range neededBesidesCalls[name] {
				called[a] = true
			}
			if called["s3:GetObject"] {
				called["s3:ListBucket"] = true
			}
			for _, g := range grants(t, s.function(t, name)) {
				for _, a := range g.actions {
					if !called[a] {
						t.Errorf("%s may %s, which none of its code calls (it calls %v)", name, a, slices.Sorted(maps.Keys(called)))
					}
				}
			}
		}
	}
}
