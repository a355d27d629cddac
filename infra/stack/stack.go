package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/durachat/durachat/shared/aws/awslocal"
	"github.com/durachat/durachat/shared/aws/sdkbody"
	"github.com/durachat/durachat/shared/config"
)

// Options configure a stack.
type Options struct {
	// Root is the module root: template.yaml, Makefile, functions/, infra/.
	Root string
	// Addr is where the API listens (DURACHAT_ADDR); "" picks a free
	// loopback port.
	Addr string
	// Tokens, when set (DURACHAT_TOKENS), deploys the template's bearer
	// token fallback instead of the JWT authorizer: the stack keeps them
	// in its local stand-in for the secret store (TokensStore), and the
	// functions read them from there through ApiTokensSecret, as in AWS.
	Tokens string
	// TokensStore is where Tokens are kept: config.SecretsManager (when
	// "") or config.ParameterStore.
	TokensStore string
	// The compaction model, in place of the template's Bedrock model
	// (which is not reachable locally): "" is offline.
	Model, ModelURL, ModelKey string
	// Params override more template parameters (Search, LogLevel, ...).
	Params map[string]string
	// Visibility, when set, replaces the queues' visibility timeout from
	// the template (720 s): fault runs that kill the compact function use
	// a shorter one to converge in minutes. The retries the function makes
	// itself (10 s) are unchanged.
	Visibility time.Duration
	// AccountConcurrency is the account's concurrency quota in the
	// Region (DefaultAccountConcurrency when 0). As in Lambda, a function
	// with ReservedConcurrentExecutions runs at most that many execution
	// environments, and the others share what the reservations leave,
	// which must be at least MinUnreserved; a function fed by an event
	// source mapping runs at most its MaximumConcurrency too.
	AccountConcurrency int
	// Logs receives the emulators' and functions' output; Log the stack's
	// own lines.
	Logs io.Writer
	Log  *slog.Logger
	// RIE is aws-lambda-rie; "" finds it in .tools/bin or on PATH.
	RIE string
	// TableFaults routes the functions' table requests through a proxy of
	// the stack's own, so that a run can inject errors into them or count
	// them (DynamoDB.Faults). Without it they reach dynalite directly, as
	// they reach DynamoDB in AWS: a hop less on each of a turn's hundred
	// table requests, and DynamoDB.Faults is nil.
	TableFaults bool
}

// Audience is the audience of the local JWT authorizer.
const Audience = "durachat-local"

// Stack is a running local deployment.
type Stack struct {
	URL       string // the API
	Issuer    *Issuer
	DevToken  string // a token of tenant "local" for 24 h; "" with Tokens
	Template  *Template
	Functions map[string]*Function // by logical id
	Pollers   []*Poller

	DynamoDB, S3, SQS *Backend
	// Secrets serves Secrets Manager's and SSM Parameter Store's
	// protocols: the stand-in for where AWS keeps the bearer tokens.
	Secrets *Backend
	// TokensSecret is the ARN the functions read their tokens from; ""
	// without Tokens.
	TokensSecret   string
	Table, Bucket  string
	Queues         map[string]string // logical id -> URL
	SQSClient      *sqs.Client
	DynamoDBClient *dynamodb.Client

	srv     *http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	tmp     string
	closers []func()
}

// Start builds the functions, starts the backends and creates the
// template's table, bucket and queues on them, then serves the API and
// polls the queues. Close stops everything.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Stack{Functions: map[string]*Function{}, Queues: map[string]string{}}
	if err := s.start(ctx, o); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context, o Options) error {
	rie, err := findRIE(o)
	if err != nil {
		return err
	}
	tplPath := filepath.Join(o.Root, "template.yaml")
	params := map[string]string{}
	for k, v := range o.Params {
		params[k] = v
	}
	if s.Secrets, err = serveBackend("secrets", awslocal.NewSecrets(Region, AccountID), nil); err != nil {
		return err
	}
	if o.Tokens != "" {
		if s.TokensSecret, err = s.storeTokens(ctx, o); err != nil {
			return err
		}
		params["ApiTokensSecret"] = s.TokensSecret
		params["JwtIssuer"], params["JwtAudience"] = "", ""
	} else {
		if s.Issuer, err = StartIssuer(); err != nil {
			return err
		}
		s.closers = append(s.closers, func() { s.Issuer.Close() })
		params["JwtIssuer"], params["JwtAudience"] = s.Issuer.URL, Audience
		if s.DevToken, err = s.Issuer.Token(map[string]any{"sub": config.LocalTenant, "aud": Audience}, 24*time.Hour); err != nil {
			return err
		}
	}
	// What to create is read before the resources exist.
	shape, err := ReadTemplate(tplPath, params, Physical{})
	if err != nil {
		return err
	}
	targets, err := BuildTargets(filepath.Join(o.Root, "Makefile"))
	if err != nil {
		return err
	}

	// Build while the backends start.
	if s.tmp, err = os.MkdirTemp("", "durachat-stack-"); err != nil {
		return err
	}
	built := make(chan error, 1)
	go func() { built <- build(ctx, o.Root, s.tmp, shape, targets) }()

	startTable := StartDirect
	if o.TableFaults {
		startTable = StartNodeServer
	}
	if s.DynamoDB, err = startTable(o.Root, awslocal.DynamoDB); err != nil {
		<-built
		return err
	}
	if s.SQS, err = StartNodeServer(o.Root, awslocal.SQS); err != nil {
		<-built
		return err
	}
	if s.S3, err = StartS3(); err != nil {
		<-built
		return err
	}
	phys, err := s.create(ctx, shape, o)
	if err != nil {
		<-built
		return err
	}
	if err := <-built; err != nil {
		return err
	}
	if s.Template, err = ReadTemplate(tplPath, params, phys); err != nil {
		return err
	}

	limits, err := Concurrency(s.Template, o.AccountConcurrency)
	if err != nil {
		return err
	}
	ports := DefaultPorts()
	for name, def := range s.Template.Functions {
		l := limits[name]
		s.Functions[name] = &Function{Def: def, Bootstrap: filepath.Join(s.tmp, name, "bootstrap"), RIE: rie,
			Env: s.env(def, o), Max: l.Max, Pool: l.Pool, Logs: o.Logs, Ports: ports}
	}

	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the API cannot listen on %s: %w", addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: NewGateway(s.Template, s.Functions, o.Log), ReadHeaderTimeout: 30 * time.Second}
	go s.srv.Serve(ln)

	pctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, src := range s.Template.Sources {
		for name := range s.Queues {
			if phys.Attrs[name+".Arn"] == src.QueueARN {
				src.Queue = name
			}
		}
		fn := s.Functions[src.Function]
		url := s.Queues[src.Queue]
		if fn == nil || url == "" {
			return fmt.Errorf("event source mapping %s <- %s: no such function or queue", src.Function, src.Queue)
		}
		p := &Poller{Source: src, QueueURL: url, QueueARN: phys.Attrs[src.Queue+".Arn"], Function: fn, Client: s.SQSClient, Log: o.Log}
		s.Pollers = append(s.Pollers, p)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); p.Run(pctx) }()
	}
	return nil
}

// Close stops the API, the pollers, the functions and the backends.
func (s *Stack) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	for _, f := range s.Functions {
		f.Close()
	}
	s.wg.Wait()
	for _, b := range []*Backend{s.DynamoDB, s.SQS, s.S3, s.Secrets} {
		if b != nil {
			b.Close()
		}
	}
	for _, c := range s.closers {
		c()
	}
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}

// DefaultAccountConcurrency is Lambda's default concurrency quota of an
// account in a Region; MinUnreserved is what Lambda keeps unreserved.
const (
	DefaultAccountConcurrency = 1000
	MinUnreserved             = 100
)

// Limit is how many invocations of a function may run at once: at most
// Max, and, for a function without a reservation, while Pool has room.
type Limit struct {
	Max  int
	Pool *Pool
}

// Concurrency gives each function of tpl the limits Lambda would, in an
// account whose quota is account (DefaultAccountConcurrency when 0): its
// reservation, or a place in the one pool of what the reservations leave
// (refused, as Lambda refuses the reservations, when that is under
// MinUnreserved), and, for an event source's function, at most the
// mapping's MaximumConcurrency.
func Concurrency(tpl *Template, account int) (map[string]Limit, error) {
	if account == 0 {
		account = DefaultAccountConcurrency
	}
	reserved := 0
	for _, def := range tpl.Functions {
		reserved += def.Reserved
	}
	unreserved := account - reserved
	if unreserved < MinUnreserved {
		return nil, fmt.Errorf("the functions reserve %d of the account's concurrency of %d: Lambda keeps %d unreserved", reserved, account, MinUnreserved)
	}
	pool := NewPool(unreserved)
	limits := map[string]Limit{}
	for name, def := range tpl.Functions {
		l := Limit{Max: def.Reserved}
		if l.Max == 0 {
			l = Limit{Max: unreserved, Pool: pool}
		}
		for _, src := range tpl.Sources {
			if src.Function == name {
				l.Max = min(l.Max, src.MaxConcurrency)
			}
		}
		limits[name] = l
	}
	return limits, nil
}

func findRIE(o Options) (string, error) {
	if o.RIE != "" {
		return o.RIE, nil
	}
	p := filepath.Join(o.Root, ".tools", "bin", "aws-lambda-rie")
	if _, err := os.Stat(p); err == nil {
		return filepath.Abs(p)
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p, nil
	}
	return "", errors.New("aws-lambda-rie is not installed: run `make tools`")
}

// build compiles each function's package (from its Makefile target) for
// this host, as sam build does for Lambda but for this GOOS and GOARCH,
// into dir/<LogicalId>/bootstrap.
func build(ctx context.Context, root, dir string, tpl *Template, targets map[string]string) error {
	var names []string
	for name := range tpl.Functions {
		if targets[name] == "" {
			return fmt.Errorf("function %s has no build-%s target in the Makefile", name, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	// One go build for all, so that the packages they share compile once;
	// functions that run the same program (memory and view) share its
	// binary.
	var pkgs []string
	for _, n := range names {
		if !slices.Contains(pkgs, targets[n]) {
			pkgs = append(pkgs, targets[n])
		}
	}
	out := filepath.Join(dir, "bin")
	args := append([]string{"build", "-tags", "lambda.norpc", "-trimpath", "-o", out + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the functions: %w\n%s", err, msg)
	}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(out, filepath.Base(targets[n])), filepath.Join(dir, n, "bootstrap")); err != nil {
			return fmt.Errorf("placing %s's bootstrap: %w", n, err)
		}
	}
	return nil
}

func awsConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:  &http.Client{Timeout: time.Minute},
		APIOptions:  sdkbody.APIOptions(),
	}
}

// storeTokens keeps o.Tokens in the local secret store, as an operator
// keeps them in AWS, and returns the ARN to deploy with.
func (s *Stack) storeTokens(ctx context.Context, o Options) (string, error) {
	cfg := awsConfig()
	cfg.BaseEndpoint = aws.String(s.Secrets.URL)
	const name = StackName + "-tokens"
	switch o.TokensStore {
	case "", config.SecretsManager:
		out, err := secretsmanager.NewFromConfig(cfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String(name), SecretString: aws.String(o.Tokens)})
		if err != nil {
			return "", fmt.Errorf("storing the tokens in the local Secrets Manager: %w", err)
		}
		return aws.ToString(out.ARN), nil
	case config.ParameterStore:
		if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/" + name),
			Value: aws.String(o.Tokens), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
			return "", fmt.Errorf("storing the tokens in the local Parameter Store: %w", err)
		}
		return "arn:aws:ssm:" + Region + ":" + AccountID + ":parameter/" + name, nil
	}
	return "", fmt.Errorf("tokens store %q: want %s or %s", o.TokensStore, config.SecretsManager, config.ParameterStore)
}

// SecretsClients are SDK clients of the stack's local secret store.
func (s *Stack) SecretsClients() (*secretsmanager.Client, *ssm.Client) {
	cfg := awsConfig()
	cfg.BaseEndpoint = aws.String(s.Secrets.URL)
	return secretsmanager.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
}

// create makes the template's tables, buckets and queues on the backends
// and returns their physical names.
func (s *Stack) create(ctx context.Context, tpl *Template, o Options) (Physical, error) {
	phys := Physical{Refs: map[string]string{}, Attrs: map[string]string{}}
	cfg := awsConfig()
	s.DynamoDBClient = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.DynamoDB.URL) })
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(s.S3.URL); o.UsePathStyle = true })
	s.SQSClient = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(s.SQS.URL) })

	for name, def := range tpl.Tables {
		physical := StackName + "-" + name
		in := &dynamodb.CreateTableInput{TableName: aws.String(physical), BillingMode: dynamotypes.BillingModePayPerRequest}
		for _, a := range def.Attributes {
			in.AttributeDefinitions = append(in.AttributeDefinitions, dynamotypes.AttributeDefinition{
				AttributeName: aws.String(a.AttributeName), AttributeType: dynamotypes.ScalarAttributeType(a.AttributeType)})
		}
		for _, k := range def.Keys {
			in.KeySchema = append(in.KeySchema, dynamotypes.KeySchemaElement{
				AttributeName: aws.String(k.AttributeName), KeyType: dynamotypes.KeyType(k.KeyType)})
		}
		// dynalite has no TTL (UpdateTimeToLive): the table is made without.
		if _, err := s.DynamoDBClient.CreateTable(ctx, in); err != nil {
			return phys, fmt.Errorf("creating table %s: %w", name, err)
		}
		phys.Refs[name] = physical
		phys.Attrs[name+".Arn"] = "arn:aws:dynamodb:" + Region + ":" + AccountID + ":table/" + physical
		s.Table = physical
	}
	for _, name := range tpl.Buckets {
		physical := strings.ToLower(StackName + "-" + name)
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(physical)}); err != nil {
			return phys, fmt.Errorf("creating bucket %s: %w", name, err)
		}
		phys.Refs[name] = physical
		phys.Attrs[name+".Arn"] = "arn:aws:s3:::" + physical
		s.Bucket = physical
	}
	// Dead-letter queues first: a redrive policy names its target's ARN.
	var names []string
	for name := range tpl.Queues {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		return (tpl.Queues[names[i]].DeadLetterQueue == "") && (tpl.Queues[names[j]].DeadLetterQueue != "")
	})
	for _, name := range names {
		def := tpl.Queues[name]
		visibility := def.VisibilityTimeout
		if o.Visibility > 0 {
			visibility = int(o.Visibility / time.Second)
		}
		attrs := map[string]string{
			"VisibilityTimeout":      strconv.Itoa(visibility),
			"MessageRetentionPeriod": strconv.Itoa(def.RetentionPeriod),
		}
		if def.DeadLetterQueue != "" {
			target, ok := phys.Attrs[def.DeadLetterQueue+".Arn"]
			if !ok {
				return phys, fmt.Errorf("queue %s: dead-letter queue %s is not a queue of the template", name, def.DeadLetterQueue)
			}
			attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, target, def.MaxReceiveCount)
		}
		physical := StackName + "-" + name
		out, err := s.SQSClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(physical), Attributes: attrs})
		if err != nil {
			return phys, fmt.Errorf("creating queue %s: %w", name, err)
		}
		got, err := s.SQSClient.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return phys, fmt.Errorf("reading queue %s: %w", name, err)
		}
		url := aws.ToString(out.QueueUrl)
		s.Queues[name] = url
		phys.Refs[name] = url
		phys.Attrs[name+".Arn"] = got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		phys.Attrs[name+".QueueName"] = physical
		phys.Attrs[name+".QueueUrl"] = url
	}
	return phys, nil
}

// env is a function's environment: the template's variables, the local
// model in place of Bedrock, and the endpoints and credentials of the
// local servers.
func (s *Stack) env(def FunctionDef, o Options) []string {
	vars := map[string]string{}
	for k, v := range def.Env {
		vars[k] = v
	}
	if _, ok := vars[config.EnvModel]; ok {
		vars[config.EnvModel] = or(o.Model, "offline")
		vars[config.EnvModelURL] = o.ModelURL
		vars[config.EnvModelKey] = o.ModelKey
	}
	env := []string{
		"AWS_REGION=" + Region,
		"AWS_DEFAULT_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.DynamoDB.URL,
		"AWS_ENDPOINT_URL_S3=" + s.S3.URL,
		"AWS_ENDPOINT_URL_SQS=" + s.SQS.URL,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + s.Secrets.URL,
		"AWS_ENDPOINT_URL_SSM=" + s.Secrets.URL,
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}
