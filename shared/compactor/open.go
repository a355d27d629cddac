package compactor

import (
	"context"
	"fmt"
	"strings"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/durachat/durachat/shared/aws/sdkbody"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/anthropic"
	"github.com/durachat/durachat/shared/model/bedrock"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/model/openai"
)

// OpenModel returns the model m names (config.Model, as DURACHAT_MODEL
// parses):
//
//	offline                 extracts, no key, no network
//	bedrock:<model-id>      Amazon Bedrock Converse, AWS credentials from the environment
//	anthropic:<model>       Anthropic Messages, with the given key
//	openai:<model>          Chat Completions, with the given key
//
// url, when set (DURACHAT_MODEL_URL), replaces the provider's endpoint: a
// compatible server there may need no key. config.Load checks that a key
// or a URL is set.
func OpenModel(ctx context.Context, m config.Model, url, key string) (model.Model, error) {
	switch m.Provider {
	case config.ProviderOffline:
		return offline.New(), nil
	case config.ProviderBedrock:
		client, err := bedrockClient(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", m, err)
		}
		return bedrock.New(client, m.ID, bedrock.Options{CachePoint: bedrockCaches(m.ID)}), nil
	case config.ProviderAnthropic:
		opts := []anthropicoption.RequestOption{anthropicoption.WithAPIKey(key)}
		if url != "" {
			opts = append(opts, anthropicoption.WithBaseURL(url))
		}
		client := anthropicsdk.NewClient(opts...)
		return anthropic.New(&client, m.ID, anthropic.Options{}), nil
	case config.ProviderOpenAI:
		opts := []openaioption.RequestOption{openaioption.WithAPIKey(key)}
		if url != "" {
			opts = append(opts, openaioption.WithBaseURL(url))
		}
		client := openaisdk.NewClient(opts...)
		// Local servers often know only the older max_tokens field.
		return openai.New(&client, m.ID, openai.Options{LegacyMaxTokens: url != ""}), nil
	}
	return nil, fmt.Errorf("model %s: unknown provider %q", m, m.Provider)
}

// OpenEmbedder returns the embedding model of search by meaning that cfg
// names (DURACHAT_EMBED_MODEL), or nil when it names none:
//
//	openai:<model>       an OpenAI-compatible /v1/embeddings endpoint (DURACHAT_EMBED_URL
//	                     for a local server, which may need no key)
//	bedrock:<model id>   Titan Text Embeddings through Bedrock InvokeModel, AWS
//	                     credentials and Region from the environment, as the summarizer's
func OpenEmbedder(ctx context.Context, cfg config.Config) (memory.Embedder, error) {
	m, url := cfg.EmbedModel, cfg.EmbedURL
	switch m.Provider {
	case "":
		return nil, nil
	case config.ProviderBedrock:
		client, err := bedrockClient(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("embedding model %s: %w", m, err)
		}
		return bedrock.NewEmbedder(client, m.ID), nil
	case config.ProviderOpenAI:
		opts := []openaioption.RequestOption{openaioption.WithAPIKey(cfg.EmbedKey)}
		if url != "" {
			opts = append(opts, openaioption.WithBaseURL(url))
		}
		client := openaisdk.NewClient(opts...)
		return openai.NewEmbedder(&client, m.ID), nil
	}
	return nil, fmt.Errorf("%s: %s serves no embedding model", config.EnvEmbedModel, m.Provider)
}

// bedrockClient is the Bedrock runtime client of the environment's AWS
// configuration (credentials and Region), at url when set.
func bedrockClient(ctx context.Context, url string) (*bedrockruntime.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithAPIOptions(sdkbody.APIOptions()))
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
		if url != "" {
			o.BaseEndpoint = &url
		}
	}), nil
}

// bedrockCaches: the Bedrock model families that take cache points.
func bedrockCaches(modelID string) bool {
	return strings.Contains(modelID, "anthropic.claude") || strings.Contains(modelID, "amazon.nova")
}

// Open returns the compactor cfg names: a host's own (over HTTP or as a
// Lambda function) when configured, else the compactor over cfg's model.
func Open(ctx context.Context, cfg config.Config) (memory.Compactor, error) {
	switch {
	case cfg.CompactorURL != "":
		return &HTTPCompactor{URL: cfg.CompactorURL}, nil
	case cfg.CompactorFunction != "":
		ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithAPIOptions(sdkbody.APIOptions()))
		if err != nil {
			return nil, fmt.Errorf("loading AWS configuration for %s: %w", config.EnvCompactorFunction, err)
		}
		return &LambdaCompactor{
			Function: cfg.CompactorFunction,
			Invoker:  &LambdaInvoker{Client: lambda.NewFromConfig(ac)},
		}, nil
	}
	m, err := OpenModel(ctx, cfg.Model, cfg.ModelURL, cfg.ModelKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvModel, err)
	}
	if cfg.Model.Provider == config.ProviderOffline {
		// An extract per node costs nothing: one to a call keeps each
		// its own task.
		return Single(New(m, Options{})), nil
	}
	return New(m, Options{}), nil
}

// single is a compactor without group calls.
type single struct{ memory.Compactor }

// Single hides c's group calls, if it has them: memory then writes each
// node with a call of its own.
func Single(c memory.Compactor) memory.Compactor { return single{c} }
