// Package testenv gives tests real storage backends: the embedded (bbolt)
// stores in a temporary directory, and the AWS adapters against local
// servers that speak the AWS protocols. A feature test runs against both:
//
//	for _, b := range testenv.All(t) {
//		t.Run(b.Name, func(t *testing.T) { ... b.Table ... })
//	}
//
// It also has decorators that inject outages into any backend (faults.go).
package testenv

import (
	"crypto/rand"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/store"
)

// Backend is one complete set of stores.
type Backend struct {
	Name     string // "embedded" or "aws"
	Table    store.Table
	Blobs    store.Blobs
	Linker   store.Linker
	Queue    store.Queue
	Receiver store.Receiver
	// DB is the embedded file (Embedded only): DB.Keys lists everything
	// in it.
	DB *embedded.DB
}

// Embedded opens the embedded stores in a temporary directory, closed when
// the test ends. Its Linker makes links to a local HTTP server (an
// httptest server serving the Linker's handler over Blobs, as the local
// server does: a link is served while its chat names the image) so a link
// can be fetched with net/http, as a presigned S3 URL can.
func Embedded(t testing.TB) Backend {
	t.Helper()
	db, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatalf("open embedded stores: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close embedded stores: %v", err)
		}
	})
	secret := make([]byte, 32)
	rand.Read(secret)
	blobs := db.Blobs()
	// The unstarted server listens already, so its address is known
	// before the handler that serves the links is set.
	srv := httptest.NewUnstartedServer(nil)
	linker := embedded.NewLinker("http://"+srv.Listener.Addr().String(), secret)
	srv.Config.Handler = linker.Handler(blobs, chatid.New(db.Table()).NamedThrough)
	srv.Start()
	t.Cleanup(srv.Close)
	queue := db.Queue("test")
	return Backend{Name: "embedded", Table: db.Table(), Blobs: blobs, Linker: linker, Queue: queue, Receiver: queue, DB: db}
}

// AWS gives the AWS adapters on local servers: DynamoDB (minidyn behind
// awstest.Fidelity), S3 (gofakes3) and SQS (local-aws-sqs), with a fresh
// table, bucket and queue for each call. When the SQS server's Node
// modules are missing it skips the test, or fails it in CI (env CI set);
// under -short it skips the test.
func AWS(t testing.TB) Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("aws backend: not in -short")
	}
	ddb := awstest.StartDynamoDB(t)
	s3 := awstest.StartS3(t)
	sqs := awstest.StartSQS(t)
	blobs := s3blobs.New(s3.Client, s3.CreateBucket(t))
	queue := sqsqueue.New(sqs.Client, sqs.CreateQueue(t))
	return Backend{
		Name:     "aws",
		Table:    dynamo.New(ddb.Client, ddb.CreateTable(t)),
		Blobs:    blobs,
		Linker:   blobs,
		Queue:    queue,
		Receiver: queue,
	}
}

// All gives every backend: embedded and AWS. Under -short, or outside CI
// when the local SQS server cannot be had, it logs why and gives the
// embedded backend alone rather than skip the test.
func All(t testing.TB) []Backend {
	t.Helper()
	backends := []Backend{Embedded(t)}
	if why := awstest.SQSMissing(); why != "" {
		t.Logf("leaving out the aws backend: local SQS server: %s", why)
		return backends
	}
	return append(backends, AWS(t))
}

// LongEnv, when set (make test-long), runs the long tests at the full
// size they are written for; without it they run at the smallest size
// that still proves their rule, and the full size is for make test-long.
const LongEnv = "DURACHAT_TEST_LONG"

// Long reports whether LongEnv is set.
func Long() bool { return os.Getenv(LongEnv) != "" }
