// Package config reads durachat's configuration from environment variables,
// in one place. Each program (a Lambda function or the local server) declares
// the variables it reads (Vars); Load looks up only those, so the declared
// lists are complete by construction and the template test can check that
// the template sets every variable each function reads.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/durachat/durachat/shared/store"
)

// Program names a binary that reads configuration.
type Program string

// The Lambda functions and the local server.
const (
	Restore Program = "restore"
	Offload Program = "offload"
	Memory  Program = "memory"
	Compact Program = "compact"
	Serve   Program = "serve"
)

// Functions are the Lambda functions, in template order.
var functions = []Program{Restore, Offload, Memory, Compact}

// Functions returns the programs deployed as Lambda functions.
func Functions() []Program { return slices.Clone(functions) }

// Environment variable names.
const (
	EnvAddr              = "DURACHAT_ADDR"
	EnvData              = "DURACHAT_DATA"
	EnvTokens            = "DURACHAT_TOKENS"
	EnvTokensSecret      = "DURACHAT_TOKENS_SECRET"
	EnvTenantClaim       = "DURACHAT_TENANT_CLAIM"
	EnvJWTIssuer         = "DURACHAT_JWT_ISSUER"
	EnvTable             = "DURACHAT_TABLE"
	EnvBucket            = "DURACHAT_BUCKET"
	EnvQueueURL          = "DURACHAT_QUEUE_URL"
	EnvModel             = "DURACHAT_MODEL"
	EnvModelURL          = "DURACHAT_MODEL_URL"
	EnvModelKey          = "DURACHAT_MODEL_KEY"
	EnvSearch            = "DURACHAT_SEARCH"
	EnvEmbedModel        = "DURACHAT_EMBED_MODEL"
	EnvEmbedURL          = "DURACHAT_EMBED_URL"
	EnvPublicURL         = "DURACHAT_PUBLIC_URL"
	EnvLinkSecret        = "DURACHAT_LINK_SECRET"
	EnvLogLevel          = "DURACHAT_LOG_LEVEL"
	EnvCompactorURL      = "DURACHAT_COMPACTOR_URL"
	EnvCompactorFunction = "DURACHAT_COMPACTOR_FUNCTION"
	EnvBatchBuilds       = "DURACHAT_BATCH_BUILDS"
	EnvSettleAfter       = "DURACHAT_SETTLE_AFTER"

	// The providers' conventional key variables: the local server falls
	// back to them when DURACHAT_MODEL_KEY is unset.
	EnvAnthropicKey = "ANTHROPIC_API_KEY"
	EnvOpenAIKey    = "OPENAI_API_KEY"
)

// renamed maps variables that no longer exist to their new names.
var renamed = map[string]string{
	"DURACHAT_COMPRESSOR_URL":      EnvCompactorURL,
	"DURACHAT_COMPRESSOR_FUNCTION": EnvCompactorFunction,
}

// Defaults.
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultData        = "./.durachat"
	DefaultTenantClaim = "sub"
	// LocalTenant is the one tenant of a local server without tokens.
	LocalTenant = "local"
	// MinLinkSecret is the shortest accepted DURACHAT_LINK_SECRET, in bytes.
	MinLinkSecret = 16
)

// httpCommon is what every function behind the HTTP API reads: logging and
// authentication. In Lambda the bearer tokens come from a secret, never
// from the environment (which anyone allowed GetFunctionConfiguration can
// read).
var httpCommon = []string{EnvLogLevel, EnvTenantClaim, EnvJWTIssuer, EnvTokensSecret}

var reads = map[Program][]string{
	// restore reads images (and presigns links to them), and which images
	// the chat in the route names (its references, in the table).
	Restore: {EnvBucket, EnvTable},
	// offload stores images, and records each for the chat in the route
	// (its references, in the table); the rows that log them are the
	// memory function's.
	Offload: {EnvBucket, EnvTable},
	// memory serves the transcript, view, tools and status, and schedules builds.
	// It embeds search queries (and entries not embedded yet) with the
	// embedding model, when one is set.
	Memory: {EnvBucket, EnvTable, EnvQueueURL, EnvSearch, EnvEmbedModel, EnvEmbedURL},
	// compact builds nodes: rows, images, the retry queue and the model.
	// and how many builds of one batch run at once.
	Compact: {EnvBucket, EnvTable, EnvQueueURL, EnvSearch, EnvEmbedModel, EnvEmbedURL, EnvModel, EnvModelURL, EnvModelKey, EnvCompactorURL, EnvCompactorFunction, EnvLogLevel, EnvBatchBuilds},
	// serve is every route on the embedded stores.
	Serve: {EnvAddr, EnvData, EnvTokens, EnvSearch, EnvEmbedModel, EnvEmbedURL, EnvModel, EnvModelURL, EnvModelKey, EnvAnthropicKey, EnvOpenAIKey,
		EnvPublicURL, EnvLinkSecret, EnvLogLevel, EnvCompactorURL, EnvCompactorFunction, EnvSettleAfter},
}

// Vars lists the environment variables p reads, sorted.
func Vars(p Program) []string {
	vs := slices.Clone(reads[p])
	switch p {
	case Restore, Offload, Memory:
		vs = append(vs, httpCommon...)
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// Required lists the variables p cannot start without.
func Required(p Program) []string {
	var req []string
	for _, v := range Vars(p) {
		switch v {
		case EnvTable, EnvBucket, EnvQueueURL:
			if p != Serve {
				req = append(req, v)
			}
		case EnvModel:
			if p == Compact {
				req = append(req, v)
			}
		}
	}
	return req
}

// Model is a parsed DURACHAT_MODEL: "offline", "bedrock:<model id>",
// "anthropic:<model>" or "openai:<model>".
type Model struct {
	Provider string
	ID       string
}

// Model providers.
const (
	ProviderOffline   = "offline"
	ProviderBedrock   = "bedrock"
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
)

func (m Model) String() string {
	if m.ID == "" {
		return m.Provider
	}
	return m.Provider + ":" + m.ID
}

// Config is every setting; a program uses the ones it declared.
type Config struct {
	Program Program

	// Addr is the local server's listen address.
	Addr string
	// DataDir holds the embedded stores.
	DataDir string
	// Tokens maps a bearer token to its tenant (the local server). Empty:
	// one tenant on loopback only.
	Tokens map[string]string
	// TokensSecret names the secret the Lambda functions read their bearer
	// tokens from. Zero: only JWT claims authenticate.
	TokensSecret TokensSecret
	// TenantClaim names the JWT claim that carries the tenant.
	TenantClaim string
	// JWTIssuer is the issuer of the JWTs the API's authorizer accepts,
	// which its Protected Resource Metadata names. Empty: no JWTs.
	JWTIssuer string

	Table    string
	Bucket   string
	QueueURL string

	Model    Model
	ModelURL string
	// ModelKey is the API key for the anthropic and openai providers
	// (locally, ANTHROPIC_API_KEY or OPENAI_API_KEY when DURACHAT_MODEL_KEY
	// is unset).
	ModelKey string
	// Search turns on the opt-in search tool.
	Search bool
	// EmbedModel is the embedding model of search by meaning
	// ("openai:<model>" or "bedrock:<model id>"); its zero value (no
	// Provider) is none: search ranks by words alone.
	EmbedModel Model
	// EmbedURL replaces the embedding provider's endpoint (a local
	// OpenAI-compatible server); EmbedKey is the openai provider's key
	// (OPENAI_API_KEY, or the summarizer's key when it is OpenAI's too).
	EmbedURL string
	EmbedKey string

	// PublicURL is the base of local signed image links.
	PublicURL string
	// LinkSecret signs local image links; empty means a random secret per start.
	LinkSecret []byte

	LogLevel slog.Level

	CompactorURL      string
	CompactorFunction string

	// BatchBuilds bounds the builds one batch of the build queue runs at
	// once (1 to MaxBatchBuilds); 0 leaves memory's default.
	BatchBuilds int

	// SettleAfter is the local server's wait before a chat's deletion is
	// swept once more and an erasure deletes its images' bytes (from
	// MinSettleAfter to MaxSettleAfter); 0 leaves the lifecycle's default.
	SettleAfter time.Duration
}

// Bounds of SettleAfter: the lifecycle's default is well over twice the
// longest request; a shorter wait is for tests (a request still running
// when it ends may lose an image an erasure released). The longest is
// the queue's longest delay.
const (
	MinSettleAfter = time.Second
	MaxSettleAfter = 15 * time.Minute
)

// MaxBatchBuilds is the most builds one compact invocation runs at once:
// each holds a model call and a few rows, and the function's memory bounds
// how many fit.
const MaxBatchBuilds = 100

// Load reads p's configuration through lookup (os.LookupEnv in a program).
// All bad values are reported together, each naming its variable.
func Load(p Program, lookup func(string) (string, bool)) (Config, error) {
	if _, ok := reads[p]; !ok {
		return Config{}, fmt.Errorf("config: unknown program %q", p)
	}
	r := &reader{p: p, lookup: lookup, declared: Vars(p)}
	c := Config{Program: p}
	r.listening(&c)
	c.Table = r.str(EnvTable, "")
	c.Bucket = r.str(EnvBucket, "")
	c.QueueURL = r.optionalURL(EnvQueueURL)
	r.modelSettings(&c)
	c.Search = r.boolean(EnvSearch, false)
	r.embedSettings(&c)
	r.links(&c)
	c.LogLevel = r.level(EnvLogLevel)
	r.builds(&c)
	r.together(&c)
	if err := errors.Join(r.errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// listening reads where the local server listens, where it keeps its data
// and who may call it.
func (r *reader) listening(c *Config) {
	c.Addr = r.str(EnvAddr, DefaultAddr)
	if r.declares(EnvAddr) {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			r.fail(EnvAddr, "%q is not host:port: %v", c.Addr, err)
		}
	}
	c.DataDir = r.str(EnvData, DefaultData)
	c.Tokens = r.tokens(EnvTokens)
	if v := r.str(EnvTokensSecret, ""); v != "" {
		var err error
		if c.TokensSecret, err = ParseTokensSecret(v); err != nil {
			r.fail(EnvTokensSecret, "%v", err)
		}
	}
	c.TenantClaim = r.str(EnvTenantClaim, DefaultTenantClaim)
	c.JWTIssuer = r.optionalURL(EnvJWTIssuer)
}

// modelSettings reads the model, its URL and its key (the provider's own
// key variable when the generic one is unset).
func (r *reader) modelSettings(c *Config) {
	c.Model = r.model(EnvModel)
	c.ModelURL = r.optionalURL(EnvModelURL)
	c.ModelKey = r.str(EnvModelKey, "")
	if c.ModelKey == "" {
		switch c.Model.Provider {
		case ProviderAnthropic:
			c.ModelKey = r.str(EnvAnthropicKey, "")
		case ProviderOpenAI:
			c.ModelKey = r.str(EnvOpenAIKey, "")
		}
	}
}

// embedSettings reads the embedding model of search by meaning, its URL
// and its key.
func (r *reader) embedSettings(c *Config) {
	c.EmbedURL = r.optionalURL(EnvEmbedURL)
	v := r.str(EnvEmbedModel, "")
	if v == "" {
		if c.EmbedURL != "" {
			r.fail(EnvEmbedURL, "is set but %s is not: name the model, as in openai:<model>", EnvEmbedModel)
		}
		return
	}
	m, err := ParseModel(v)
	switch {
	case err != nil:
		r.fail(EnvEmbedModel, "%v", err)
		return
	case m.Provider != ProviderOpenAI && m.Provider != ProviderBedrock:
		r.fail(EnvEmbedModel, "%q: an embedding model is openai:<model> or bedrock:<model id>", v)
		return
	}
	c.EmbedModel = m
	if m.Provider == ProviderOpenAI {
		// The summarizer's key when it is OpenAI's too.
		c.EmbedKey = r.str(EnvOpenAIKey, "")
		if c.EmbedKey == "" && c.Model.Provider == ProviderOpenAI {
			c.EmbedKey = c.ModelKey
		}
		if c.EmbedKey == "" && c.EmbedURL == "" {
			r.fail(EnvEmbedModel, "the openai provider needs an API key (%s) or %s for a keyless compatible endpoint", EnvOpenAIKey, EnvEmbedURL)
		}
	}
}

// links reads the base of image links (the listen address's, by default,
// where the program declares it) and the secret that signs them.
func (r *reader) links(c *Config) {
	c.PublicURL = r.str(EnvPublicURL, "")
	if c.PublicURL == "" && r.declares(EnvPublicURL) {
		c.PublicURL = "http://" + c.Addr
	}
	if c.PublicURL != "" {
		r.httpURL(EnvPublicURL, c.PublicURL)
		c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	}
	if s := r.str(EnvLinkSecret, ""); s != "" {
		if len(s) < MinLinkSecret {
			r.fail(EnvLinkSecret, "must be at least %d bytes", MinLinkSecret)
		}
		c.LinkSecret = []byte(s)
	}
}

// builds reads a custom compactor's URL or function, and how many builds
// a batch runs at once.
func (r *reader) builds(c *Config) {
	c.CompactorURL = r.optionalURL(EnvCompactorURL)
	c.CompactorFunction = r.str(EnvCompactorFunction, "")
	if v := r.str(EnvBatchBuilds, ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxBatchBuilds {
			r.fail(EnvBatchBuilds, "%q must be a whole number from 1 to %d", v, MaxBatchBuilds)
		}
		c.BatchBuilds = n
	}
	if v := r.str(EnvSettleAfter, ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinSettleAfter || d > MaxSettleAfter {
			r.fail(EnvSettleAfter, "%q must be a duration from %s to %s", v, MinSettleAfter, MaxSettleAfter)
		}
		c.SettleAfter = d
	}
}

// together checks what no single variable tells: a setting under its old
// name (which would otherwise be silently ignored), both kinds of custom
// compactor, the variables the program requires, and a provider's key.
func (r *reader) together(c *Config) {
	for old, now := range renamed {
		if !r.declares(now) {
			continue
		}
		if _, set := r.lookup(old); set {
			r.fail(old, "was renamed %s", now)
		}
	}
	if c.CompactorURL != "" && c.CompactorFunction != "" {
		r.fail(EnvCompactorFunction, "set %s or %s, not both", EnvCompactorURL, EnvCompactorFunction)
	}
	for _, name := range Required(r.p) {
		if v, _ := r.lookup(name); strings.TrimSpace(v) == "" {
			r.fail(name, "is required by the %s function", r.p)
		}
	}
	if c.Model.Provider == ProviderAnthropic || c.Model.Provider == ProviderOpenAI {
		if c.ModelKey == "" && c.ModelURL == "" {
			r.fail(EnvModelKey, "the %s provider needs an API key (or %s for a keyless compatible endpoint)", c.Model.Provider, EnvModelURL)
		}
	}
}

// VarError is one bad variable.
type VarError struct {
	Var     string
	Message string
}

func (e *VarError) Error() string { return "config: " + e.Var + " " + e.Message }

type reader struct {
	p        Program
	lookup   func(string) (string, bool)
	declared []string
	errs     []error
}

func (r *reader) declares(name string) bool {
	_, ok := slices.BinarySearch(r.declared, name)
	return ok
}

func (r *reader) fail(name, format string, args ...any) {
	r.errs = append(r.errs, &VarError{Var: name, Message: fmt.Sprintf(format, args...)})
}

// str is the trimmed value of name, or def when unset or empty. A variable
// the program did not declare is never looked up and reads as def: it is
// not part of that program's configuration.
func (r *reader) str(name, def string) string {
	if !r.declares(name) {
		return def
	}
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return def
	}
	return v
}

// optionalURL is the value of name, checked as an http or https URL when
// set.
func (r *reader) optionalURL(name string) string {
	v := r.str(name, "")
	if v != "" {
		r.httpURL(name, v)
	}
	return v
}

func (r *reader) httpURL(name, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.fail(name, "%q must be an absolute http or https URL", v)
	}
}

func (r *reader) boolean(name string, def bool) bool {
	v := r.str(name, "")
	switch strings.ToLower(v) {
	case "":
		return def
	case "on", "true", "1", "yes":
		return true
	case "off", "false", "0", "no":
		return false
	}
	r.fail(name, "%q must be on or off", v)
	return def
}

func (r *reader) level(name string) slog.Level {
	v := r.str(name, "info")
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		r.fail(name, "%q must be debug, info, warn or error", v)
		return slog.LevelInfo
	}
	return l
}

func (r *reader) model(name string) Model {
	m, err := ParseModel(r.str(name, ProviderOffline))
	if err != nil {
		r.fail(name, "%v", err)
		return Model{Provider: ProviderOffline}
	}
	return m
}

// ParseModel parses a DURACHAT_MODEL setting: "offline",
// "bedrock:<model id>", "anthropic:<model>" or "openai:<model>".
func ParseModel(v string) (Model, error) {
	v = strings.TrimSpace(v)
	provider, id, _ := strings.Cut(v, ":")
	switch provider {
	case ProviderOffline:
		if id != "" {
			return Model{}, fmt.Errorf("%q: offline takes no model id", v)
		}
		return Model{Provider: provider}, nil
	case ProviderBedrock, ProviderAnthropic, ProviderOpenAI:
		if strings.TrimSpace(id) == "" {
			return Model{}, fmt.Errorf("%q needs a model id, as in %s:<model>", v, provider)
		}
		return Model{Provider: provider, ID: id}, nil
	}
	return Model{}, fmt.Errorf("%q: unknown provider %q: it must be offline, bedrock:<model id>, anthropic:<model> or openai:<model>", v, provider)
}

// MinTokenBytes is the shortest bearer token accepted.
const MinTokenBytes = 16

// tokens parses name's "token1=tenantA,token2=tenantB".
func (r *reader) tokens(name string) map[string]string {
	out, errs := parseTokens(r.str(name, ""))
	for _, err := range errs {
		r.fail(name, "%s", err)
	}
	return out
}

// ParseTokens parses bearer tokens as DURACHAT_TOKENS and the tokens
// secret hold them: "token1=tenantA,token2=tenantB", each token at least
// MinTokenBytes long. Empty is no tokens. An error names the entries by
// number, never their tokens.
func ParseTokens(v string) (map[string]string, error) {
	out, errs := parseTokens(v)
	if len(errs) > 0 {
		return nil, fmt.Errorf("bearer tokens: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func parseTokens(v string) (map[string]string, []string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	out := make(map[string]string)
	var errs []string
	for i, pair := range strings.Split(v, ",") {
		token, tenant, ok := strings.Cut(strings.TrimSpace(pair), "=")
		token, tenant = strings.TrimSpace(token), strings.TrimSpace(tenant)
		switch {
		case !ok || token == "" || tenant == "":
			errs = append(errs, fmt.Sprintf("entry %d must be token=tenant", i+1))
			continue
		case strings.ContainsFunc(token, unicode.IsSpace) || strings.ContainsFunc(token, unicode.IsControl):
			errs = append(errs, fmt.Sprintf("entry %d: a token cannot contain spaces or control characters", i+1))
			continue
		case len(token) < MinTokenBytes:
			errs = append(errs, fmt.Sprintf("entry %d: a token must be at least %d bytes, not %d: a short token can be guessed", i+1, MinTokenBytes, len(token)))
			continue
		}
		if err := store.CheckTenant(tenant); err != nil {
			errs = append(errs, fmt.Sprintf("entry %d: %v", i+1, err))
			continue
		}
		if _, dup := out[token]; dup {
			errs = append(errs, fmt.Sprintf("entry %d repeats a token", i+1))
			continue
		}
		out[token] = tenant
	}
	return out, errs
}

// Where a tokens secret is kept.
const (
	SecretsManager = "secretsmanager"
	ParameterStore = "ssm"
)

// TokensSecret is a parsed DURACHAT_TOKENS_SECRET: the ARN of a Secrets
// Manager secret or of an SSM SecureString parameter.
type TokensSecret struct {
	// Service is SecretsManager or ParameterStore; "" when none is set.
	Service string
	// ARN is the secret's or parameter's full ARN, which the function's
	// role may read and nothing else.
	ARN string
}

// Set reports whether a secret is named.
func (s TokensSecret) Set() bool { return s.ARN != "" }

// ParseTokensSecret parses the ARN of a Secrets Manager secret
// (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>)
// or of an SSM parameter (arn:aws:ssm:<region>:<account>:parameter/<name>).
func ParseTokensSecret(arn string) (TokensSecret, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !strings.HasPrefix(parts[1], "aws") || parts[3] == "" || len(parts[4]) != 12 {
		return TokensSecret{}, fmt.Errorf("%q is not the ARN of a Secrets Manager secret or an SSM parameter", arn)
	}
	switch resource := parts[5]; parts[2] {
	case SecretsManager:
		name, ok := strings.CutPrefix(resource, "secret:")
		// Secrets Manager appends a dash and 6 random characters to the
		// name; a partial ARN would match no policy's resource.
		if !ok || len(name) < 8 || name[len(name)-7] != '-' {
			return TokensSecret{}, fmt.Errorf("%q is not a secret's full ARN (secret:<name>-<6 characters>, as the console or create-secret shows it)", arn)
		}
	case ParameterStore:
		if name, ok := strings.CutPrefix(resource, "parameter/"); !ok || name == "" {
			return TokensSecret{}, fmt.Errorf("%q is not a parameter's ARN (parameter/<name>)", arn)
		}
	default:
		return TokensSecret{}, fmt.Errorf("%q: the tokens are kept in Secrets Manager or SSM Parameter Store, not %s", arn, parts[2])
	}
	return TokensSecret{Service: parts[2], ARN: arn}, nil
}

// Logger returns the JSON logger every program writes with (to stdout, in
// Lambda and locally).
func (c Config) Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: c.LogLevel})).With("program", string(c.Program))
}
