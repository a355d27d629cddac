package tokensecret

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/durachat/durachat/shared/aws/awslocal"
	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/tokens"
)

const account = "000000000000"

// local serves the Secrets Manager and SSM protocols until the test ends,
// and returns the SDK configuration that reaches it.
func local(t *testing.T) aws.Config {
	t.Helper()
	srv := httptest.NewServer(awslocal.NewSecrets("us-east-1", account))
	t.Cleanup(srv.Close)
	cfg := awstest.Config()
	cfg.BaseEndpoint = aws.String(srv.URL)
	return cfg
}

func open(t *testing.T, cfg aws.Config, arn string) tokens.Reader {
	t.Helper()
	secret, err := config.ParseTokensSecret(arn)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(cfg, secret)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestASecretsManagerSecretIsReadAsItIsNow(t *testing.T) {
	ctx := context.Background()
	cfg := local(t)
	sm := secretsmanager.NewFromConfig(cfg)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("durachat/tokens"), SecretString: aws.String("token-a-0123456789=a")})
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, cfg, aws.ToString(created.ARN))
	if text, err := r.ReadTokens(ctx); err != nil || text != "token-a-0123456789=a" {
		t.Fatalf("read %q, %v", text, err)
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: aws.String("token-b-0123456789=b")}); err != nil {
		t.Fatal(err)
	}
	if text, err := r.ReadTokens(ctx); err != nil || text != "token-b-0123456789=b" {
		t.Fatalf("after a new version: %q, %v", text, err)
	}
	// A secret that does not exist is the SDK's typed error, wrapped.
	missing := open(t, cfg, "arn:aws:secretsmanager:us-east-1:"+account+":secret:other-AbCdEf")
	_, err = missing.ReadTokens(ctx)
	var nf *smtypes.ResourceNotFoundException
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "other-AbCdEf") {
		t.Errorf("a missing secret: %v, want ResourceNotFoundException naming it", err)
	}
}

func TestAnSSMSecureStringIsReadDecryptedAndAPlainStringRefused(t *testing.T) {
	ctx := context.Background()
	cfg := local(t)
	client := ssm.NewFromConfig(cfg)
	for name, typ := range map[string]ssmtypes.ParameterType{"/durachat/tokens": ssmtypes.ParameterTypeSecureString, "/durachat/plain": ssmtypes.ParameterTypeString} {
		if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("token-a-0123456789=a"), Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	r := open(t, cfg, "arn:aws:ssm:us-east-1:"+account+":parameter/durachat/tokens")
	if text, err := r.ReadTokens(ctx); err != nil || text != "token-a-0123456789=a" {
		t.Fatalf("read %q, %v", text, err)
	}
	var malformed *tokens.MalformedError
	if _, err := open(t, cfg, "arn:aws:ssm:us-east-1:"+account+":parameter/durachat/plain").ReadTokens(ctx); !errors.As(err, &malformed) {
		t.Errorf("a String parameter: %v, want it refused as malformed", err)
	}
	var nf *ssmtypes.ParameterNotFound
	if _, err := open(t, cfg, "arn:aws:ssm:us-east-1:"+account+":parameter/none").ReadTokens(ctx); !errors.As(err, &nf) {
		t.Errorf("a missing parameter: %v, want ParameterNotFound", err)
	}
}

// Through a Source, a bad secret read over the wire is an outage (503)
// and a metric, and its fix heals the function without a deploy.
func TestAMalformedSecretReadOverTheWireIsCountedAndHeals(t *testing.T) {
	ctx := context.Background()
	cfg := local(t)
	sm := secretsmanager.NewFromConfig(cfg)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("t"), SecretString: aws.String("not tokens")})
	if err != nil {
		t.Fatal(err)
	}
	var metrics strings.Builder
	s := tokens.New(open(t, cfg, aws.ToString(created.ARN)), tokens.Options{Metrics: &metrics, Function: "fn", MinBackoff: 1, MaxBackoff: 1})
	var malformed *tokens.MalformedError
	if err := s.Load(ctx); !errors.As(err, &malformed) || strings.Contains(err.Error(), "not tokens") {
		t.Fatalf("load: %v, want a malformed secret, without its text", err)
	}
	if !strings.Contains(metrics.String(), `"TokenReadErrors":1`) {
		t.Errorf("metrics %q", metrics.String())
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: aws.String("token-a-0123456789=a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatalf("after the fix: %v", err)
	}
}
