package compactor

import (
	"context"
	"fmt"
	"strings"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/anthropic"
	"github.com/durachat/durachat/shared/model/bedrock"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/model/openai"
)

// Environment variables OpenModel reads for provider keys.
const (
	EnvAnthropicKey = "ANTHROPIC_API_KEY"
	EnvOpenAIKey    = "OPENAI_API_KEY"
)

// OpenModel returns the model a DURACHAT_MODEL setting names:
//
//	offline                 extracts, no key, no network
//	bedrock:<model-id>      Amazon Bedrock Converse, AWS credentials from the environment
//	anthropic:<model>       Anthropic Messages, with the given key (none for a compatible server at url)
//	openai:<model>          Chat Completions, with the given key
//
// url, when set (DURACHAT_MODEL_URL), replaces the provider's endpoint:
// a local OpenAI-compatible server needs no key.
func OpenModel(ctx context.Context, spec, url, key string) (model.Model, error) {
	spec = strings.TrimSpace(spec)
	if spec == "offline" {
		return offline.New(), nil
	}
	provider, name, ok := strings.Cut(spec, ":")
	if !ok || name == "" {
		return nil, fmt.Errorf("model setting %q: want offline, bedrock:<model-id>, anthropic:<model> or openai:<model>", spec)
	}
	switch provider {
	case "bedrock":
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("model setting %q: loading AWS configuration: %w", spec, err)
		}
		client := bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
			if url != "" {
				o.BaseEndpoint = &url
			}
		})
		return bedrock.New(client, name, bedrock.Options{CachePoint: bedrockCaches(name)}), nil
	case "anthropic":
		if key == "" && url == "" {
			return nil, fmt.Errorf("model setting %q: no API key (DURACHAT_MODEL_KEY, or %s locally; a compatible server set with DURACHAT_MODEL_URL needs none)", spec, EnvAnthropicKey)
		}
		opts := []anthropicoption.RequestOption{anthropicoption.WithAPIKey(key)}
		if url != "" {
			opts = append(opts, anthropicoption.WithBaseURL(url))
		}
		client := anthropicsdk.NewClient(opts...)
		return anthropic.New(&client, name, anthropic.Options{}), nil
	case "openai":
		if key == "" && url == "" {
			return nil, fmt.Errorf("model setting %q: no API key (DURACHAT_MODEL_KEY, or %s locally; a local server set with DURACHAT_MODEL_URL needs none)", spec, EnvOpenAIKey)
		}
		opts := []openaioption.RequestOption{openaioption.WithAPIKey(key)}
		if url != "" {
			opts = append(opts, openaioption.WithBaseURL(url))
		}
		client := openaisdk.NewClient(opts...)
		// Local servers often know only the older max_tokens field.
		return openai.New(&client, name, openai.Options{LegacyMaxTokens: url != ""}), nil
	}
	return nil, fmt.Errorf("model setting %q: unknown provider %q: want offline, bedrock, anthropic or openai", spec, provider)
}

// bedrockCaches: the Bedrock model families that take cache points.
func bedrockCaches(modelID string) bool {
	return strings.Contains(modelID, "anthropic.claude") || strings.Contains(modelID, "amazon.nova")
}
