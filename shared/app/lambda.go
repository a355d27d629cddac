package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lambdahttp"
)

// AWSTimeout bounds one AWS call attempt, under API Gateway's 30 s.
const AWSTimeout = 20 * time.Second

// AWSStores builds the AWS adapters for the resources cfg names. The SDK
// reads credentials, region and endpoint overrides (AWS_ENDPOINT_URL_*)
// from the environment Lambda provides.
func AWSStores(ctx context.Context, cfg config.Config) (Stores, error) {
	ac, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(AWSTimeout)))
	if err != nil {
		return Stores{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	var s Stores
	if cfg.Table != "" {
		s.Table = dynamo.New(dynamodb.NewFromConfig(ac), cfg.Table)
	}
	if cfg.Bucket != "" {
		b := s3blobs.New(s3.NewFromConfig(ac), cfg.Bucket)
		s.Blobs, s.Linker = b, b
	}
	if cfg.QueueURL != "" {
		q := sqsqueue.New(sqs.NewFromConfig(ac), cfg.QueueURL)
		s.Queue, s.Receiver = q, q
	}
	return s, nil
}

// Function is what a Lambda function's main gets at its cold start.
type Function struct {
	Config config.Config
	Log    *slog.Logger
	Stores Stores
}

// InitFunction loads p's configuration and builds its AWS stores, once per
// cold start. A bad configuration is logged and exits, so the function's
// init fails visibly instead of answering with a half-built program.
func InitFunction(p config.Program) Function {
	cfg, err := config.Load(p, os.LookupEnv)
	if err != nil {
		fatal(slog.New(slog.NewJSONHandler(os.Stdout, nil)), "configuration", err)
	}
	log := cfg.Logger(os.Stdout)
	// Code that logs without a request context writes the same JSON lines.
	slog.SetDefault(log)
	stores, err := AWSStores(context.Background(), cfg)
	if err != nil {
		fatal(log, "stores", err)
	}
	return Function{Config: cfg, Log: log, Stores: stores}
}

// StartHTTP serves routes (built by the function's main from f) as an API
// Gateway HTTP API function. It does not return.
func (f Function) StartHTTP(routes ...api.Routes) {
	h, err := Handler(f.Log, LambdaAuth(f.Config), f.Stores, routes)
	if err != nil {
		fatal(f.Log, "handler", err)
	}
	lambda.Start(lambdahttp.New(h).Invoke)
}

// Fatal logs that the function cannot start and exits.
func (f Function) Fatal(what string, err error) { fatal(f.Log, what, err) }

func fatal(log *slog.Logger, what string, err error) {
	log.Error("cannot start: "+what, "err", err.Error())
	os.Exit(1)
}

func claimTenant(claim string, fallback api.Authenticator) api.Authenticator {
	return lambdahttp.ClaimTenant(claim, fallback)
}
