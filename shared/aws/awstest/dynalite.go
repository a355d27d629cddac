package awstest

import (
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/durachat/durachat/shared/aws/awslocal"
)

// dynalite is a child process shared by every test of one test binary,
// started at the first use, like the SQS server.
var dynalite struct {
	once     sync.Once
	endpoint string
	skip     string
	err      error
	server   *awslocal.Server
}

// StartDynalite connects to the shared dynalite server (infra/dynalite)
// through a proxy of this test's own, with Faults, that stops when the
// test ends. dynalite has DynamoDB's own validation and limits where
// minidyn is lenient: 1 MB query pages, a batch get naming a key twice and
// a query starting outside its key condition are refused, items over
// 400 KB too. It has no TTL and no transactions. When its Node modules are
// not installed the test is skipped, or fails when CI is set.
func StartDynalite(t testing.TB) *DynamoDB {
	t.Helper()
	dynalite.once.Do(func() {
		dynalite.endpoint, dynalite.skip, dynalite.err = startLocal(awslocal.DynamoDB, &dynalite.server)
	})
	switch {
	case dynalite.err != nil:
		t.Fatalf("dynalite: %v", dynalite.err)
	case dynalite.skip != "" && os.Getenv("CI") != "":
		t.Fatalf("dynalite cannot start in CI: %s", dynalite.skip)
	case dynalite.skip != "":
		t.Skipf("dynalite: %s", dynalite.skip)
	}
	faults := NewFaults(proxy(dynalite.endpoint))
	srv := httptest.NewServer(faults)
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(Config(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
	})
	return &DynamoDB{URL: srv.URL, Client: client, Faults: faults, srv: srv}
}
