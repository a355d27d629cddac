// Package tokensecret reads the Lambda functions' bearer tokens from where
// the template names them: a Secrets Manager secret or an SSM Parameter
// Store SecureString, each by its ARN (config.TokensSecret). The text is
// parsed by the tokens package.
package tokensecret

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/tokens"
)

// Open returns the reader of secret, with clients built from cfg.
func Open(cfg aws.Config, secret config.TokensSecret) (tokens.Reader, error) {
	switch secret.Service {
	case config.SecretsManager:
		return &SecretsManager{Client: secretsmanager.NewFromConfig(cfg), ARN: secret.ARN}, nil
	case config.ParameterStore:
		return &Parameter{Client: ssm.NewFromConfig(cfg), ARN: secret.ARN}, nil
	}
	return nil, fmt.Errorf("tokensecret: no store for %q", secret.ARN)
}

// SecretsManager reads the tokens from a secret's current SecretString.
type SecretsManager struct {
	Client *secretsmanager.Client
	ARN    string
}

// ReadTokens reads the secret.
func (s *SecretsManager) ReadTokens(ctx context.Context) (string, error) {
	out, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.ARN)})
	if err != nil {
		return "", fmt.Errorf("reading the tokens secret %s: %w", s.ARN, err)
	}
	if out.SecretString == nil {
		return "", &tokens.MalformedError{Err: errors.New("the secret holds binary data, not token=tenant text")}
	}
	return *out.SecretString, nil
}

// Parameter reads the tokens from an SSM SecureString parameter,
// decrypted. A plain String parameter is refused: the tokens would be
// stored unencrypted.
type Parameter struct {
	Client *ssm.Client
	ARN    string
}

// ReadTokens reads the parameter.
func (p *Parameter) ReadTokens(ctx context.Context) (string, error) {
	out, err := p.Client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(p.ARN), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("reading the tokens parameter %s: %w", p.ARN, err)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", &tokens.MalformedError{Err: errors.New("the parameter has no value")}
	}
	if out.Parameter.Type != ssmtypes.ParameterTypeSecureString {
		return "", &tokens.MalformedError{Err: fmt.Errorf("the parameter is a %s, not a SecureString: store the tokens encrypted", out.Parameter.Type)}
	}
	return *out.Parameter.Value, nil
}
