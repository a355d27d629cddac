// Package lambdafn wires a durachat Lambda function: its configuration, its
// logger, the AWS configuration its stores are built from, the S3 store
// every function reads images from, and serving routes behind API Gateway.
// A function's main builds any other store it uses itself (the memory and
// compact functions: the table and the queue), so a function links only the
// SDKs it calls.
package lambdafn

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/aws/sdkbody"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/lambdahttp"
)

// AWSTimeout bounds one AWS call attempt, under API Gateway's 30 s.
const AWSTimeout = 20 * time.Second

// Function is what a Lambda function's main gets at its cold start.
type Function struct {
	Config config.Config
	Log    *slog.Logger
	// AWS is the SDK configuration the function's stores are built from.
	AWS aws.Config
	// Stores has the bucket's Blobs, Linker, Uploader and Staging; a main
	// adds what else it uses before serving.
	Stores app.Stores
	// Public are routes StartHTTP serves without credentials (the memory
	// browser's pages); the template routes them without the authorizer.
	Public []api.Routes
	// Tokens authenticates bearer tokens for the requests no JWT
	// authorizer vouched for; nil refuses them. httpfn.Init sets it from
	// the tokens secret.
	Tokens api.Authenticator
}

// Init loads p's configuration and the AWS configuration, and builds the S3
// store, once per cold start. The SDK reads credentials, region and
// endpoint overrides (AWS_ENDPOINT_URL_*) from the environment Lambda
// provides. A bad configuration is logged and exits, so the function's
// init fails visibly instead of answering with a half-built program.
func Init(p config.Program) Function {
	setMemoryLimit(os.LookupEnv)
	cfg, err := config.Load(p, os.LookupEnv)
	if err != nil {
		fatal(slog.New(slog.NewJSONHandler(os.Stdout, nil)), "configuration", err)
	}
	logger := cfg.Logger(os.Stdout)
	// Code that logs without a request context writes the same JSON lines.
	slog.SetDefault(logger)
	ac, err := AWSConfig(context.Background())
	if err != nil {
		fatal(logger, "stores", fmt.Errorf("loading AWS configuration: %w", err))
	}
	f := Function{Config: cfg, Log: logger, AWS: ac}
	if cfg.Bucket != "" {
		b := s3blobs.New(s3.NewFromConfig(ac), cfg.Bucket)
		f.Stores.Blobs, f.Stores.Linker = b, b
		f.Stores.Uploader, f.Stores.Staging = b, b
	}
	return f
}

// AWSConfig is the AWS configuration of every function's clients: the
// SDK's defaults from the environment, each attempt bounded by AWSTimeout,
// and each request body sent as sdkbody.ReadOnly sends it.
func AWSConfig(ctx context.Context) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(AWSTimeout)),
		awsconfig.WithAPIOptions(sdkbody.APIOptions()))
}

// setMemoryLimit sets the Go runtime's soft memory limit to 3/8 of the
// function's memory, unless GOMEMLIMIT sets one: the collector then works
// harder before the heap doubles, and with the image decode budget at a
// quarter of the memory a request stays within half of it. (At half, the
// limit itself let a process reach 262 MB of 512 under attack: resident
// memory also holds the binary and what the collector freed but has not
// returned.)
func setMemoryLimit(lookup func(string) (string, bool)) {
	if n := memoryLimit(lookup); n > 0 {
		debug.SetMemoryLimit(n)
	}
}

// memoryLimit is 3/8 of AWS_LAMBDA_FUNCTION_MEMORY_SIZE (MB) in bytes, or
// 0 when GOMEMLIMIT is set or the size is unknown.
func memoryLimit(lookup func(string) (string, bool)) int64 {
	if _, set := lookup("GOMEMLIMIT"); set {
		return 0
	}
	v, _ := lookup("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
	mb, err := strconv.ParseInt(v, 10, 64)
	if err != nil || mb <= 0 {
		return 0
	}
	return mb << 20 * 3 / 8
}

// StartHTTP serves routes (built by the function's main from f) as an API
// Gateway HTTP API function. It does not return.
func (f Function) StartHTTP(routes ...api.Routes) {
	h, err := f.Handler(routes...)
	if err != nil {
		fatal(f.Log, "handler", err)
	}
	lambdahttp.New(h).Start()
}

// Fatal logs that the function cannot start and exits.
func (f Function) Fatal(what string, err error) { fatal(f.Log, what, err) }

func fatal(logger *slog.Logger, what string, err error) {
	logger.Error("cannot start: "+what, "err", err.Error())
	os.Exit(1)
}

// Handler is the handler StartHTTP serves: routes behind Auth, and the
// public ones (f.Public, and the API's Protected Resource Metadata when
// the API takes JWTs).
func (f Function) Handler(routes ...api.Routes) (http.Handler, error) {
	public := append(slices.Clone(f.Public), api.ProtectedResource{Issuer: f.Config.JWTIssuer})
	return app.Handler(f.Log, Auth(f.Config, f.Tokens), f.Stores, routes, public...)
}

// Auth authenticates requests in Lambda: the tenant is the JWT authorizer's
// configured claim; without an authorizer, bearer is asked (the tokens
// secret's, which httpfn.Init reads; nil refuses such requests). Where the
// API takes JWTs its 401s name the Protected Resource Metadata.
func Auth(cfg config.Config, bearer api.Authenticator) api.Authenticator {
	return api.ProtectedResource{Issuer: cfg.JWTIssuer}.Authenticator(lambdahttp.ClaimTenant(cfg.TenantClaim, bearer))
}
