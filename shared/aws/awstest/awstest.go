// Package awstest runs local servers that speak the AWS wire protocols, for
// tests of the AWS adapters: minidyn for DynamoDB behind our Fidelity
// wrapper, gofakes3 for S3 (both in-process over plain HTTP), and
// local-aws-sqs for SQS (a Node process started once per test binary from
// infra/sqs). Each server can inject protocol faults (Faults).
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	minidyn "github.com/truora/minidyn/server"

	"github.com/durachat/durachat/shared/aws/awslocal"
	"github.com/durachat/durachat/shared/aws/sdkbody"
	"github.com/durachat/durachat/shared/store"
)

// Config is the client configuration for local servers: static
// credentials, us-east-1, and one quick retry so fault tests stay fast.
func Config() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 2
				o.MaxBackoff = 20 * time.Millisecond
				o.RateLimiter = ratelimit.None
			})
		},
		// Above SQS's longest poll (20 s), below go test's patience.
		HTTPClient: &http.Client{Timeout: time.Minute},
		APIOptions: sdkbody.APIOptions(),
	}
}

// Name returns a fresh resource name: prefix and 12 random hex digits.
func Name(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// DynamoDB is a local DynamoDB server for one test.
type DynamoDB struct {
	URL    string
	Client *dynamodb.Client
	// Faults answers chosen requests with errors before minidyn sees them.
	Faults *Faults
	srv    *httptest.Server
}

// StartDynamoDB starts minidyn behind Faults and Fidelity; it stops when
// the test ends.
func StartDynamoDB(t testing.TB) *DynamoDB {
	t.Helper()
	return StartDynamoDBOn(t, minidyn.NewServer())
}

// StartDynamoDBOn serves server (a minidyn server, whose failure emulation
// the test drives) behind Faults and Fidelity until the test ends.
func StartDynamoDBOn(t testing.TB, server http.Handler) *DynamoDB {
	t.Helper()
	faults := NewFaults(nil)
	fidelity := NewFidelity(server)
	fidelity.Faults = faults
	srv := httptest.NewServer(fidelity)
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(Config(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
	})
	return &DynamoDB{URL: srv.URL, Client: client, Faults: faults, srv: srv}
}

// Close stops the server before the test ends, to test an unreachable
// service.
func (d *DynamoDB) Close() { d.srv.Close() }

// CreateTable creates a fresh on-demand table with durachat's key schema
// (pk hash, sk range, both strings), waits until it is ACTIVE, and returns
// its name.
func (d *DynamoDB) CreateTable(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := Name("durachat-")
	_, err := d.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: dynamotypes.BillingModePayPerRequest,
		AttributeDefinitions: []dynamotypes.AttributeDefinition{
			{AttributeName: aws.String(store.AttrPK), AttributeType: dynamotypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(store.AttrSK), AttributeType: dynamotypes.ScalarAttributeTypeS},
		},
		KeySchema: []dynamotypes.KeySchemaElement{
			{AttributeName: aws.String(store.AttrPK), KeyType: dynamotypes.KeyTypeHash},
			{AttributeName: aws.String(store.AttrSK), KeyType: dynamotypes.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(d.Client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 10 * time.Millisecond
		o.MaxDelay = 100 * time.Millisecond
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 10*time.Second); err != nil {
		t.Fatalf("table %s never became active: %v", name, err)
	}
	return name
}

// S3 is a local S3 server for one test.
type S3 struct {
	URL    string
	Client *s3.Client
	Faults *Faults
}

// StartS3 starts gofakes3 on memory behind Faults and
// awslocal.PresignedPuts, over plain HTTP (behind
// TLS it would store the SDK's chunk framing inside objects); it stops when
// the test ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	creds, err := Config().Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	faults := NewFaults(awslocal.NewPresignedPuts(gofakes3.New(s3mem.New()).Server(), creds, Config().Region))
	srv := httptest.NewServer(faults)
	t.Cleanup(srv.Close)
	client := s3.NewFromConfig(Config(), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.UsePathStyle = true
	})
	return &S3{URL: srv.URL, Client: client, Faults: faults}
}

// CreateBucket creates a fresh bucket and returns its name.
func (s *S3) CreateBucket(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := Name("durachat-")
	if _, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// SQS is a local SQS endpoint for one test: a proxy with Faults and
// LongPoll in front of the test binary's shared local-aws-sqs process.
type SQS struct {
	URL    string
	Client *sqs.Client
	Faults *Faults
}

// StartSQS connects to the shared SQS server, starting it on first use
// (see sqsServer), through a proxy of this test's own that stops when the
// test ends.
func StartSQS(t testing.TB) *SQS {
	t.Helper()
	upstream := sqsServer(t)
	faults := NewFaults(awslocal.NewLongPoll(proxy(upstream)))
	srv := httptest.NewServer(faults)
	t.Cleanup(srv.Close)
	client := sqs.NewFromConfig(Config(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
	})
	return &SQS{URL: srv.URL, Client: client, Faults: faults}
}

// CreateQueue creates a fresh standard queue and returns its URL.
func (s *SQS) CreateQueue(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := Name("durachat-")
	out, err := s.Client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return aws.ToString(out.QueueUrl)
}
