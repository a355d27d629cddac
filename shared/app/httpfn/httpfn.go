// Package httpfn starts a durachat Lambda function that serves requests
// behind API Gateway: lambdafn's Init, and the bearer tokens of its tokens
// secret, read before it serves. (Apart from lambdafn so that the compact
// function, which serves no request, links neither secret store's client.)
package httpfn

import (
	"context"
	"os"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/aws/tokensecret"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/tokens"
)

// Init is lambdafn.Init with Tokens read from the secret the configuration
// names, if any. A failed read is logged and counted, not fatal: JWT
// requests still work, and bearer requests get 503s and retry the read.
func Init(p config.Program) lambdafn.Function {
	f := lambdafn.Init(p)
	if !f.Config.TokensSecret.Set() {
		return f
	}
	r, err := tokensecret.Open(f.AWS, f.Config.TokensSecret)
	if err != nil {
		f.Fatal("configuration", err)
	}
	src := tokens.New(r, tokens.Options{Log: f.Log, Metrics: os.Stdout,
		// Lambda sets the function's name; the alarms watch it.
		Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	_ = src.Load(context.Background())
	f.Tokens = src
	return f
}
