// Command eval-images measures image-aware summaries against a real model:
// the same 18 conversations and 6 rendered images as the plumbing test in
// eval/imagefacts, run twice through the real transcript, memory and
// compactor on embedded stores in a temporary directory, once with the
// model taking no images (before) and once with images attached (after).
// It prints the share of image facts found in the image message's leaf,
// its parent and its chat's root, then tokens and cost.
//
//	DURACHAT_MODEL=anthropic:<model> ANTHROPIC_API_KEY=... eval-images
//	DURACHAT_MODEL=bedrock:<model-id> eval-images   (AWS credentials from the environment)
//
// It calls the model a few hundred times; it is not part of the tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/durachat/durachat/eval/imagefacts"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/store"
)

// Environment the command reads, named as the rest of durachat names them.
const (
	envModel    = "DURACHAT_MODEL"
	envModelURL = "DURACHAT_MODEL_URL"
)

// errSetup is a missing or unusable configuration: exit status 2.
var errSetup = errors.New("setup")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errSetup):
		fmt.Fprintln(os.Stderr, "eval-images:", strings.TrimPrefix(err.Error(), "setup: "))
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "eval-images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		timeout    = fs.Duration("timeout", 30*time.Minute, "give up when both arms are not built by then")
		workers    = fs.Int("workers", 4, "model calls at once (keep it under the account's rate limit)")
		priceIn    = fs.Float64("price-in", 0, "US$ per million input tokens (default: the list price of known models)")
		priceOut   = fs.Float64("price-out", 0, "US$ per million output tokens")
		priceRead  = fs.Float64("price-cache-read", -1, "US$ per million cache-read tokens (default: a tenth of -price-in)")
		priceWrite = fs.Float64("price-cache-write", -1, "US$ per million cache-write tokens (default: 1.25 times -price-in)")
		out        = fs.String("out", "", "also write the report, as Markdown, to this file")
		verbose    = fs.Bool("v", false, "list every graded line that misses its fact")
	)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errSetup, err)
	}
	spec := strings.TrimSpace(os.Getenv(envModel))
	if err := checkKey(ctx, spec); err != nil {
		return err
	}
	mc, err := config.ParseModel(spec)
	if err != nil {
		return fmt.Errorf("%w: %s %v", errSetup, envModel, err)
	}
	m, err := compactor.OpenModel(ctx, mc, os.Getenv(envModelURL), modelKey(spec))
	if err != nil {
		return fmt.Errorf("%w: %v", errSetup, err)
	}
	if !m.Capabilities().Images {
		return fmt.Errorf("%w: %s takes no images as configured, so there is nothing to measure", errSetup, m.Name())
	}
	prices, known := imagefacts.PricesFor(m.Name())
	if *priceIn > 0 || *priceOut > 0 {
		prices = imagefacts.Prices{Input: *priceIn, Output: *priceOut, CacheRead: *priceIn / 10, CacheWrite: *priceIn * 1.25}
		known = true
	}
	if *priceRead >= 0 {
		prices.CacheRead = *priceRead
	}
	if *priceWrite >= 0 {
		prices.CacheWrite = *priceWrite
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := preflight(ctx, m); err != nil {
		return err
	}
	facts := imagefacts.Catalog()
	var pngs [][]byte
	for _, f := range facts {
		png, err := imagefacts.Render(f)
		if err != nil {
			return err
		}
		pngs = append(pngs, png)
	}
	convs, err := imagefacts.Conversations(facts, pngs)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// arm runs one arm; then, when set, runs on its stores before they go.
	arm := func(name string, mm model.Model, then func(blobs store.Blobs) error) (imagefacts.Result, error) {
		fmt.Fprintf(stderr, "eval-images: %s: %d conversations with %s...\n", name, len(convs), m.Name())
		dir, err := os.MkdirTemp("", "eval-images-")
		if err != nil {
			return imagefacts.Result{}, err
		}
		defer os.RemoveAll(dir)
		db, err := embedded.Open(dir)
		if err != nil {
			return imagefacts.Result{}, err
		}
		defer db.Close()
		q := db.Queue("compact")
		res, err := imagefacts.Run(ctx, imagefacts.Setup{
			Name: name, Stores: imagefacts.Stores{Table: db.Table(), Blobs: db.Blobs(), Queue: q, Receiver: q},
			Model: mm, Facts: facts, Conversations: convs, Workers: *workers, Poll: 250 * time.Millisecond, Logger: logger,
		})
		if err == nil && then != nil {
			err = then(db.Blobs())
		}
		return res, err
	}
	before, err := arm("Before: no images attached", imagefacts.TextOnly{Model: m}, nil)
	if err != nil {
		return err
	}
	// Asked later about each image, on the after arm's stores, where its
	// leaves wrote the descriptions.
	var answers []imagefacts.Answers
	askAll := func(blobs store.Blobs) error {
		for _, a := range []struct{ name, mode string }{
			{"Text-only model, no images (bare refs)", ""},
			{"Images attached (before-request, inline)", hooks.ModeInline},
			{"Text-only model, descriptions on (before-request, describe)", hooks.ModeDescribe},
		} {
			fmt.Fprintf(stderr, "eval-images: question: %s...\n", a.name)
			res, err := imagefacts.Ask(ctx, imagefacts.AskSetup{Name: a.name, Blobs: blobs, Model: m, Mode: a.mode, Facts: facts, Conversations: convs})
			if err != nil {
				return err
			}
			answers = append(answers, res)
		}
		return nil
	}
	after, err := arm("After: images attached", m, askAll)
	if err != nil {
		return err
	}

	var report strings.Builder
	fmt.Fprintf(&report, "Model %s, %d conversations per arm, %s.\n\n", m.Name(), len(convs), time.Now().UTC().Format("2006-01-02"))
	report.WriteString(imagefacts.Table(before, after))
	report.WriteString("\n")
	report.WriteString(imagefacts.AnswerTable(answers...))
	report.WriteString("\n")
	report.WriteString(imagefacts.CostTable(before, after, prices, known))
	if known {
		fmt.Fprintf(&report, "\nPrices used, US$ per million tokens: input %.2f, output %.2f, cache read %.2f, cache write %.2f. "+
			"Check them against the provider's price list; pass -price-in and -price-out to override.\n",
			prices.Input, prices.Output, prices.CacheRead, prices.CacheWrite)
	}
	fmt.Fprint(stdout, report.String())
	if *verbose {
		fmt.Fprint(stdout, "\n", imagefacts.MissReport(before), imagefacts.MissReport(after))
		for _, a := range answers {
			for _, miss := range a.Misses {
				fmt.Fprintf(stdout, "%s %s misses %q: %s\n", a.Name, miss.Chat, miss.Fact, miss.Line)
			}
		}
	}
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkKey says, before anything runs, what is missing for the model named.
func checkKey(ctx context.Context, spec string) error {
	provider, _, _ := strings.Cut(spec, ":")
	switch provider {
	case "":
		return fmt.Errorf("%w: no model configured. Set %s to a model that reads images, with its key:\n"+
			"  %s=anthropic:<model> and %s\n  %s=bedrock:<model-id> with AWS credentials (profile, environment or role)\n"+
			"  %s=openai:<model> and %s", errSetup, envModel, envModel, config.EnvAnthropicKey, envModel, envModel, config.EnvOpenAIKey)
	case "offline":
		return fmt.Errorf("%w: %s=offline cannot read images; name a real model", errSetup, envModel)
	case "anthropic":
		if os.Getenv(config.EnvAnthropicKey) == "" {
			return fmt.Errorf("%w: %s is %s but %s is not set", errSetup, envModel, spec, config.EnvAnthropicKey)
		}
	case "openai":
		if os.Getenv(config.EnvOpenAIKey) == "" && os.Getenv(envModelURL) == "" {
			return fmt.Errorf("%w: %s is %s but %s is not set", errSetup, envModel, spec, config.EnvOpenAIKey)
		}
	case "bedrock":
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("%w: loading the AWS configuration for %s: %v", errSetup, spec, err)
		}
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return fmt.Errorf("%w: %s needs AWS credentials, and none were found: %v", errSetup, spec, err)
		}
	}
	return nil
}

// preflight makes one tiny call, so a wrong key or model id stops the run
// with the provider's message instead of leaving every build retrying.
func preflight(ctx context.Context, m model.Model) error {
	_, err := m.Complete(ctx, model.Request{MaxTokens: 8, Messages: []model.Message{
		{Role: "user", Parts: []model.Part{{Text: "Answer with the word ready."}}},
	}})
	if err != nil {
		return fmt.Errorf("%w: a first call to %s failed: %v", errSetup, m.Name(), err)
	}
	return nil
}

// modelKey is the API key for spec's provider: DURACHAT_MODEL_KEY, else the
// provider's own variable.
func modelKey(spec string) string {
	if k := os.Getenv("DURACHAT_MODEL_KEY"); k != "" {
		return k
	}
	switch {
	case strings.HasPrefix(spec, "anthropic:"):
		return os.Getenv(config.EnvAnthropicKey)
	case strings.HasPrefix(spec, "openai:"):
		return os.Getenv(config.EnvOpenAIKey)
	}
	return ""
}
