package config

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

func lambdaEnv(extra map[string]string) map[string]string {
	kv := map[string]string{
		EnvTable:    "durachat",
		EnvBucket:   "durachat-images",
		EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/durachat",
		EnvModel:    "bedrock:anthropic.claude-haiku-4-5-20251001-v1:0",
	}
	for k, v := range extra {
		kv[k] = v
	}
	return kv
}

func TestServeDefaultsRunWithoutAnySetting(t *testing.T) {
	c, err := Load(Serve, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != DefaultAddr || c.DataDir != DefaultData {
		t.Errorf("addr %q data %q", c.Addr, c.DataDir)
	}
	if c.Model.Provider != ProviderOffline || c.Search || c.LogLevel != slog.LevelInfo {
		t.Errorf("model %v search %v level %v", c.Model, c.Search, c.LogLevel)
	}
	if c.PublicURL != "http://"+DefaultAddr {
		t.Errorf("public URL %q", c.PublicURL)
	}
	if len(c.Tokens) != 0 || c.LinkSecret != nil {
		t.Errorf("tokens %v secret %q", c.Tokens, c.LinkSecret)
	}
}

func TestTokensMapTokenToTenant(t *testing.T) {
	c, err := Load(Serve, env(map[string]string{EnvTokens: " token-0123456789-1=tenantA, token-0123456789-2 = tenant B "}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"token-0123456789-1": "tenantA", "token-0123456789-2": "tenant B"}
	if len(c.Tokens) != len(want) {
		t.Fatalf("tokens %v", c.Tokens)
	}
	for k, v := range want {
		if c.Tokens[k] != v {
			t.Errorf("token %q -> %q, want %q", k, c.Tokens[k], v)
		}
	}
}

func TestBadValuesNameTheirVariable(t *testing.T) {
	tests := []struct {
		name string
		kv   map[string]string
		bad  string
	}{
		{"token without tenant", map[string]string{EnvTokens: "abc"}, EnvTokens},
		{"empty tenant", map[string]string{EnvTokens: "abc="}, EnvTokens},
		{"repeated token", map[string]string{EnvTokens: "token-0123456789-a=x,token-0123456789-a=y"}, EnvTokens},
		{"token under 16 bytes", map[string]string{EnvTokens: "token-012345678=x"}, EnvTokens},
		{"token with space", map[string]string{EnvTokens: "a b=x"}, EnvTokens},
		{"dot-dot tenant", map[string]string{EnvTokens: "token-0123456789-a=.."}, EnvTokens},
		{"dot tenant", map[string]string{EnvTokens: "token-0123456789-a=."}, EnvTokens},
		{"addr without port", map[string]string{EnvAddr: "localhost"}, EnvAddr},
		{"unknown model provider", map[string]string{EnvModel: "llama:7b"}, EnvModel},
		{"bedrock without id", map[string]string{EnvModel: "bedrock:"}, EnvModel},
		{"offline with id", map[string]string{EnvModel: "offline:x"}, EnvModel},
		{"anthropic without key", map[string]string{EnvModel: "anthropic:claude"}, EnvModelKey},
		{"model URL not a URL", map[string]string{EnvModelURL: "localhost:9000"}, EnvModelURL},
		{"search not on/off", map[string]string{EnvSearch: "maybe"}, EnvSearch},
		{"log level unknown", map[string]string{EnvLogLevel: "loud"}, EnvLogLevel},
		{"short link secret", map[string]string{EnvLinkSecret: "short"}, EnvLinkSecret},
		{"public URL relative", map[string]string{EnvPublicURL: "/x"}, EnvPublicURL},
		{"both compactors", map[string]string{EnvCompactorURL: "http://127.0.0.1:1/c", EnvCompactorFunction: "f"}, EnvCompactorFunction},
		{"embedding model of an unknown provider", map[string]string{EnvEmbedModel: "llama:embed"}, EnvEmbedModel},
		{"offline embedding model", map[string]string{EnvEmbedModel: "offline"}, EnvEmbedModel},
		{"openai embedding model without key or URL", map[string]string{EnvEmbedModel: "openai:text-embedding-3-small"}, EnvEmbedModel},
		{"embedding URL without a model", map[string]string{EnvEmbedURL: "http://127.0.0.1:11434/v1"}, EnvEmbedURL},
		{"settle wait not a duration", map[string]string{EnvSettleAfter: "5"}, EnvSettleAfter},
		{"settle wait past the queue's longest delay", map[string]string{EnvSettleAfter: "16m"}, EnvSettleAfter},
		{"compactor URL under its old name", map[string]string{"DURACHAT_COMPRESSOR_URL": "http://127.0.0.1:1/c"}, "DURACHAT_COMPRESSOR_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(Serve, env(tt.kv))
			var ve *VarError
			if !errors.As(err, &ve) || ve.Var != tt.bad {
				t.Fatalf("err = %v, want a VarError naming %s", err, tt.bad)
			}
			if !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("message %q does not name %s", err, tt.bad)
			}
		})
	}
}

func TestAllBadValuesReportedTogether(t *testing.T) {
	_, err := Load(Serve, env(map[string]string{EnvSearch: "maybe", EnvLogLevel: "loud"}))
	if err == nil || !strings.Contains(err.Error(), EnvSearch) || !strings.Contains(err.Error(), EnvLogLevel) {
		t.Fatalf("err = %v, want both variables named", err)
	}
}

func TestFunctionsRequireTheirStores(t *testing.T) {
	for _, p := range Functions() {
		t.Run(string(p), func(t *testing.T) {
			if _, err := Load(p, env(lambdaEnv(nil))); err != nil {
				t.Fatalf("complete environment: %v", err)
			}
			for _, name := range Required(p) {
				kv := lambdaEnv(map[string]string{name: " "})
				_, err := Load(p, env(kv))
				var ve *VarError
				if !errors.As(err, &ve) || ve.Var != name {
					t.Errorf("without %s: err = %v", name, err)
				}
			}
		})
	}
}

func TestLoadLooksUpOnlyDeclaredVariables(t *testing.T) {
	for _, p := range append(Functions(), Serve) {
		t.Run(string(p), func(t *testing.T) {
			var seen []string
			kv := lambdaEnv(nil)
			_, _ = Load(p, func(k string) (string, bool) {
				seen = append(seen, k)
				v, ok := kv[k]
				return v, ok
			})
			declared := Vars(p)
			for _, k := range seen {
				// Old names are looked up only to say they were renamed.
				if _, old := renamed[k]; !slices.Contains(declared, k) && !old {
					t.Errorf("%s looked up %s without declaring it", p, k)
				}
			}
		})
	}
}

// The hook functions touch images only, and the table as little as they
// can: least privilege starts with not being told where the queue is.
// The hooks read no queue and no model; restore reads the table only to
// tell which images the chat names, and offload only to record the images
// it stores for their chats.
func TestHookFunctionsReadNoQueue(t *testing.T) {
	for p, none := range map[Program][]string{
		Restore: {EnvQueueURL, EnvModel},
		Offload: {EnvQueueURL, EnvModel},
	} {
		vs := Vars(p)
		for _, v := range none {
			if slices.Contains(vs, v) {
				t.Errorf("%s declares %s", p, v)
			}
		}
	}
	for p, why := range map[Program]string{
		Offload: "it records each image it stores for its chat there",
		Restore: "it restores only the images the chat names, which the table records",
	} {
		if !slices.Contains(Required(p), EnvTable) {
			t.Errorf("%s does not require %s: %s", p, EnvTable, why)
		}
	}
}

func TestModelParsesProviderAndID(t *testing.T) {
	tests := []struct {
		in   string
		want Model
	}{
		{"offline", Model{Provider: "offline"}},
		{"bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0", Model{Provider: "bedrock", ID: "us.anthropic.claude-haiku-4-5-20251001-v1:0"}},
		{"openai:gpt-4o-mini", Model{Provider: "openai", ID: "gpt-4o-mini"}},
	}
	for _, tt := range tests {
		c, err := Load(Serve, env(map[string]string{EnvModel: tt.in, EnvModelKey: "k"}))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if c.Model != tt.want || c.Model.String() != tt.in {
			t.Errorf("%s: got %+v (%s)", tt.in, c.Model, c.Model)
		}
	}
}

func TestParseModelRefusesMalformedSettings(t *testing.T) {
	for _, bad := range []string{"", "gpt", "bedrock:", "anthropic", "mystery:model", ":x", "offline:x"} {
		if m, err := ParseModel(bad); err == nil {
			t.Errorf("%q parsed as %+v", bad, m)
		}
	}
	if m, err := ParseModel(" anthropic:claude-x "); err != nil || m != (Model{Provider: ProviderAnthropic, ID: "claude-x"}) {
		t.Errorf("anthropic:claude-x: %+v, %v", m, err)
	}
}

func TestUnknownProgramIsAnError(t *testing.T) {
	if _, err := Load("nope", env(nil)); err == nil {
		t.Fatal("want an error")
	}
}

func TestEmbeddingModelIsNoneUnlessSetAndAKeylessLocalEndpointServes(t *testing.T) {
	c, err := Load(Serve, env(nil))
	if err != nil || c.EmbedModel != (Model{}) {
		t.Fatalf("embedding model %v by default, want none: %v", c.EmbedModel, err)
	}
	c, err = Load(Serve, env(map[string]string{EnvEmbedModel: "openai:nomic-embed-text", EnvEmbedURL: "http://127.0.0.1:11434/v1"}))
	if err != nil || c.EmbedModel.String() != "openai:nomic-embed-text" || c.EmbedURL != "http://127.0.0.1:11434/v1" || c.EmbedKey != "" {
		t.Fatalf("local endpoint: %+v %v", c, err)
	}
	c, err = Load(Memory, env(lambdaEnv(map[string]string{EnvEmbedModel: "bedrock:amazon.titan-embed-text-v2:0"})))
	if err != nil || c.EmbedModel.ID != "amazon.titan-embed-text-v2:0" {
		t.Fatalf("memory function: %+v %v", c.EmbedModel, err)
	}
}

func TestLocalServerFallsBackToTheProvidersKeyVariable(t *testing.T) {
	c, err := Load(Serve, env(map[string]string{EnvModel: "anthropic:claude-haiku-4-5", EnvAnthropicKey: "sk-a", EnvOpenAIKey: "sk-o"}))
	if err != nil || c.ModelKey != "sk-a" {
		t.Fatalf("key %q, err %v", c.ModelKey, err)
	}
	c, err = Load(Serve, env(map[string]string{EnvModel: "openai:gpt-4o-mini", EnvModelKey: "mine", EnvOpenAIKey: "sk-o"}))
	if err != nil || c.ModelKey != "mine" {
		t.Fatalf("key %q, err %v", c.ModelKey, err)
	}
	// A function reads only DURACHAT_MODEL_KEY: the template sets it.
	_, err = Load(Compact, env(lambdaEnv(map[string]string{EnvModel: "anthropic:claude", EnvAnthropicKey: "sk-a"})))
	var ve *VarError
	if !errors.As(err, &ve) || ve.Var != EnvModelKey {
		t.Fatalf("compact without DURACHAT_MODEL_KEY: %v", err)
	}
}

func TestTokensSecretIsTheFullARNOfASecretOrAParameter(t *testing.T) {
	tests := []struct {
		arn, service string
	}{
		{"arn:aws:secretsmanager:us-east-1:123456789012:secret:durachat/tokens-AbC123", SecretsManager},
		{"arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:t-xyz789", SecretsManager},
		{"arn:aws:ssm:eu-west-1:123456789012:parameter/durachat/tokens", ParameterStore},
		{"arn:aws:ssm:eu-west-1:123456789012:parameter/tokens", ParameterStore},
		// A partial secret ARN (no random suffix) would match no policy.
		{"arn:aws:secretsmanager:us-east-1:123456789012:secret:tokens", ""},
		{"arn:aws:ssm:eu-west-1:123456789012:parameter/", ""},
		{"arn:aws:s3:::bucket/tokens", ""},
		{"arn:aws:kms:us-east-1:123456789012:key/abc", ""},
		{"/durachat/tokens", ""},
		{"durachat/tokens", ""},
	}
	for _, tt := range tests {
		t.Run(tt.arn, func(t *testing.T) {
			c, err := Load(Memory, env(map[string]string{EnvBucket: "b", EnvTable: "t", EnvQueueURL: "http://q/x", EnvTokensSecret: tt.arn}))
			if tt.service == "" {
				var ve *VarError
				if !errors.As(err, &ve) || ve.Var != EnvTokensSecret {
					t.Fatalf("err %v, want one naming %s", err, EnvTokensSecret)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TokensSecret != (TokensSecret{Service: tt.service, ARN: tt.arn}) || !c.TokensSecret.Set() {
				t.Errorf("secret %+v", c.TokensSecret)
			}
		})
	}
}

// The functions read their tokens from a secret only: a token in their
// environment is readable by anyone allowed GetFunctionConfiguration.
func TestFunctionsReadTokensFromASecretAndTheLocalServerFromItsEnvironment(t *testing.T) {
	for _, p := range Functions() {
		vars := Vars(p)
		if slices.Contains(vars, EnvTokens) {
			t.Errorf("%s reads %s", p, EnvTokens)
		}
		if want := p != Compact; slices.Contains(vars, EnvTokensSecret) != want {
			t.Errorf("%s reads %s: %v, want %v", p, EnvTokensSecret, !want, want)
		}
	}
	if vars := Vars(Serve); !slices.Contains(vars, EnvTokens) || slices.Contains(vars, EnvTokensSecret) {
		t.Errorf("serve reads %v", vars)
	}
}

func TestParseTokensNamesTheBadEntryNeverItsToken(t *testing.T) {
	got, err := ParseTokens("token-0123456789-a=tenant-a, token-0123456789-b=tenant-b")
	if err != nil || len(got) != 2 || got["token-0123456789-b"] != "tenant-b" {
		t.Fatalf("tokens %v, %v", got, err)
	}
	if got, err := ParseTokens("  "); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"short-secret=x", "token-0123456789-a", "token-0123456789-z=y", "token 0123456789-a=x"} {
		got, err := ParseTokens("token-0123456789-z=ok," + bad)
		if err == nil || got != nil || !strings.Contains(err.Error(), "entry 2") {
			t.Errorf("%q: %v, %v; want an error naming entry 2 and no tokens", bad, got, err)
		}
		if err != nil && strings.Contains(err.Error(), "short-secret") {
			t.Errorf("the error shows a token: %v", err)
		}
	}
}
