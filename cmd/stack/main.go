// Command stack runs durachat's deployed shape on one machine (`make
// stack`): the template's functions' bootstraps under the Lambda Runtime
// Interface Emulator, behind an emulation of the HTTP API and the SQS
// event source read from template.yaml, over local DynamoDB (dynalite),
// S3 and SQS servers. It serves the API on DURACHAT_ADDR until interrupted.
//
// Without DURACHAT_TOKENS the API has the template's JWT authorizer, with
// a local issuer: a token for tenant "local" is printed at start. With
// DURACHAT_TOKENS it has the template's bearer-token fallback instead: the
// tokens are kept in a local Secrets Manager, which the functions read
// through ApiTokensSecret as they read the real one in AWS.
// DURACHAT_MODEL (and _URL, _KEY) choose the compaction model in place of
// Bedrock; the default is offline. It needs `make tools` (the emulator and
// the Node servers).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/durachat/durachat/infra/stack"
	"github.com/durachat/durachat/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	addr := os.Getenv(config.EnvAddr)
	if addr == "" {
		addr = config.DefaultAddr
	}
	params := map[string]string{}
	if v := os.Getenv(config.EnvSearch); v != "" {
		params["Search"] = v
	}
	if v := os.Getenv(config.EnvLogLevel); v != "" {
		params["LogLevel"] = v
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	start := time.Now()
	fmt.Fprintln(os.Stderr, "stack: building the functions and starting the local servers...")
	s, err := stack.Start(ctx, stack.Options{
		Root:     root,
		Addr:     addr,
		Tokens:   os.Getenv(config.EnvTokens),
		Model:    os.Getenv(config.EnvModel),
		ModelURL: os.Getenv(config.EnvModelURL),
		ModelKey: os.Getenv(config.EnvModelKey),
		Params:   params,
		Logs:     os.Stdout,
		Log:      log,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(os.Stderr, "stack: ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(os.Stderr, "  API        %s\n", s.URL)
	fmt.Fprintf(os.Stderr, "  DynamoDB   %s (table %s, dynalite)\n", s.DynamoDB.URL, s.Table)
	fmt.Fprintf(os.Stderr, "  S3         %s (bucket %s)\n", s.S3.URL, s.Bucket)
	fmt.Fprintf(os.Stderr, "  SQS        %s\n", s.SQS.URL)
	for _, p := range s.Pollers {
		fmt.Fprintf(os.Stderr, "  events     %s\n", p)
	}
	if s.DevToken != "" {
		fmt.Fprintf(os.Stderr, "  JWT issuer %s (audience %s)\n", s.Issuer.URL, stack.Audience)
		fmt.Fprintf(os.Stderr, "\nA token of tenant %q, valid 24 h:\n\n  export TOKEN=%s\n\n", config.LocalTenant, s.DevToken)
		fmt.Fprintf(os.Stderr, "  curl -H \"Authorization: Bearer $TOKEN\" %s/v1/chats/demo/status\n\n", s.URL)
	} else {
		fmt.Fprintf(os.Stderr, "  secrets    %s (Secrets Manager and SSM, local)\n", s.Secrets.URL)
		fmt.Fprintf(os.Stderr, "  auth       bearer tokens from DURACHAT_TOKENS, kept in %s (no JWT authorizer)\n", s.TokensSecret)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stack: stopping")
	return nil
}
