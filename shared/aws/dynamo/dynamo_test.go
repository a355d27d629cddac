package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	minidyn "github.com/truora/minidyn/server"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storetest"
)

func newTable(t testing.TB) (*dynamo.Table, *awstest.DynamoDB, string) {
	return newTableOn(t, awstest.StartDynamoDB)
}

func newTableOn(t testing.TB, start func(testing.TB) *awstest.DynamoDB) (*dynamo.Table, *awstest.DynamoDB, string) {
	ddb := start(t)
	name := ddb.CreateTable(t)
	return dynamo.New(ddb.Client, name), ddb, name
}

// onBoth runs a test on minidyn (fast, lenient) and on dynalite, which has
// DynamoDB's own validation and limits: a rule of the adapter that
// DynamoDB would enforce fails there even where minidyn lets it pass.
func onBoth(t *testing.T, test func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string))) {
	for _, b := range []struct {
		name  string
		start func(testing.TB) *awstest.DynamoDB
	}{{"minidyn", awstest.StartDynamoDB}, {"dynalite", awstest.StartDynalite}} {
		t.Run(b.name, func(t *testing.T) {
			test(t, func(t testing.TB) (*dynamo.Table, *awstest.DynamoDB, string) { return newTableOn(t, b.start) })
		})
	}
}

func TestTableConformance(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		storetest.TestTable(t, func(t *testing.T) store.Table {
			tbl, _, _ := newTable(t)
			return tbl
		})
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoredAttributeNamesAreStoreNames(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, ddb, name := newTable(t)
		ctx := t.Context()
		it := store.Item{Key: store.Key{PK: "p", SK: "s"}, Body: []byte("body"), Expires: time.Now().Add(time.Hour).Unix()}
		must(t, tbl.Create(ctx, it))
		out, err := ddb.Client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(name)})
		must(t, err)
		if len(out.Items) != 1 {
			t.Fatalf("scan found %d items, want 1", len(out.Items))
		}
		var names []string
		for n := range out.Items[0] {
			names = append(names, n)
		}
		slices.Sort(names)
		want := []string{store.AttrBody, store.AttrPK, store.AttrSK, store.AttrExpires, store.AttrVersion}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("stored attributes %q, want store's %q", names, want)
		}
		var raw struct {
			B   []byte `dynamodbav:"b"`
			TTL int64  `dynamodbav:"ttl"`
		}
		must(t, attributevalue.UnmarshalMap(out.Items[0], &raw))
		if string(raw.B) != "body" || raw.TTL != it.Expires {
			t.Fatalf("stored b=%q ttl=%d, want the body as binary and ttl as a number", raw.B, raw.TTL)
		}
	})
}

func TestExpiredItemIsAbsentBeforeDynamoDBDeletesIt(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		past, future := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
		gone := store.Key{PK: "p", SK: "e/1"}
		live := store.Key{PK: "p", SK: "e/2"}
		must(t, tbl.Create(ctx, store.Item{Key: gone, Body: []byte(`"old"`), Expires: past}))
		must(t, tbl.Create(ctx, store.Item{Key: live, Body: []byte(`"live"`), Expires: future}))

		if _, err := tbl.Get(ctx, gone); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of an expired item = %v, want ErrNotFound", err)
		}
		page, err := tbl.Query(ctx, store.Query{PK: "p", Prefix: "e/"})
		must(t, err)
		if len(page.Items) != 1 || page.Items[0].Key != live {
			t.Errorf("Query = %+v, want only the live item", page.Items)
		}
		items, err := tbl.BatchGet(ctx, []store.Key{gone, live})
		must(t, err)
		if len(items) != 1 || items[0].Key != live {
			t.Errorf("BatchGet = %+v, want only the live item", items)
		}
		if err := tbl.Update(ctx, store.Item{Key: gone, Version: 2, Body: []byte(`"x"`)}); !errors.Is(err, store.ErrConditionFailed) {
			t.Errorf("Update of an expired item = %v, want ErrConditionFailed", err)
		}
		// Create takes the key over from the expired item.
		must(t, tbl.Create(ctx, store.Item{Key: gone, Body: []byte(`"new"`)}))
		got, err := tbl.Get(ctx, gone)
		must(t, err)
		if got.Version != 1 || string(got.Body) != `"new"` || got.Expires != 0 {
			t.Errorf("re-created item = %+v (body %q), want the new one", got, got.Body)
		}
	})
}

func TestQueryLimitSkipsExpiredItemsAndFillsThePage(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		past := time.Now().Add(-time.Minute).Unix()
		for i := range 10 {
			it := store.Item{Key: store.Key{PK: "p", SK: fmt.Sprintf("e/%d", i)}, Body: []byte(`{}`)}
			if i%2 == 0 {
				it.Expires = past
			}
			must(t, tbl.Create(ctx, it))
		}
		page, err := tbl.Query(ctx, store.Query{PK: "p", Prefix: "e/", Limit: 3})
		must(t, err)
		if got := keys(page.Items); !slices.Equal(got, []string{"e/1", "e/3", "e/5"}) || page.Next != "e/5" {
			t.Fatalf("page = %q next %q, want [e/1 e/3 e/5] next e/5", got, page.Next)
		}
		page, err = tbl.Query(ctx, store.Query{PK: "p", Prefix: "e/", Limit: 3, After: page.Next})
		must(t, err)
		if got := keys(page.Items); !slices.Equal(got, []string{"e/7", "e/9"}) || page.Next != "" {
			t.Fatalf("last page = %q next %q, want [e/7 e/9] and no next", got, page.Next)
		}
	})
}

// DynamoDB answers at most 1 MB per Query request; a page with a Limit
// follows LastEvaluatedKey until it is full.
func TestQueryFollowsOneMegabytePages(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		body := []byte(`"` + strings.Repeat("x", 300<<10) + `"`)
		for _, sk := range []string{"a", "b", "c", "d", "e"} {
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: "p", SK: sk}, Body: body}))
		}
		page, err := tbl.Query(ctx, store.Query{PK: "p", Limit: 5})
		must(t, err)
		if got := keys(page.Items); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) || page.Next != "" {
			t.Fatalf("Limit 5 over 1.5 MB: %q next %q, want all five and no next", got, page.Next)
		}
	})
}

func TestQueryAfterOutsideThePrefixIsResolvedLocally(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		for _, sk := range []string{"d/1", "e/1", "e/2", "f/1"} {
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: "p", SK: sk}, Body: []byte(`{}`)}))
		}
		tests := []struct {
			after string
			desc  bool
			want  []string
		}{
			{after: "d/9", want: []string{"e/1", "e/2"}},
			{after: "f", want: nil},
			{after: "d/9", desc: true, want: nil},
			{after: "f", desc: true, want: []string{"e/2", "e/1"}},
			{after: "e", want: []string{"e/1", "e/2"}}, // a proper prefix of the prefix sorts first
		}
		for _, tt := range tests {
			page, err := tbl.Query(ctx, store.Query{PK: "p", Prefix: "e/", After: tt.after, Desc: tt.desc})
			must(t, err)
			if got := keys(page.Items); !slices.Equal(got, tt.want) {
				t.Errorf("after %q desc %v: %q, want %q", tt.after, tt.desc, got, tt.want)
			}
		}
	})
}

func TestBatchGetGivesRepeatedKeyTwice(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		k := store.Key{PK: "p", SK: "n/1"}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
		items, err := tbl.BatchGet(ctx, []store.Key{k, {PK: "p", SK: "n/2"}, k})
		must(t, err)
		if len(items) != 2 || items[0].Key != k || items[1].Key != k {
			t.Fatalf("BatchGet = %+v, want the item twice", items)
		}
	})
}

func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	mini := minidyn.NewServer()
	tbl, name := tableOn(t, mini)
	ctx := t.Context()
	var ks []store.Key
	for i := range 5 {
		k := store.Key{PK: "p", SK: fmt.Sprintf("n/%d", i)}
		must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(fmt.Sprint(i))}))
		ks = append(ks, k)
	}
	// Keys n/1 and n/3 come back unprocessed twice, then are read.
	var mu sync.Mutex
	asked := map[string]int{}
	mini.EmulateUnprocessedItems(name, func(_ int, raw map[string]*minidyn.AttributeValue) bool {
		mu.Lock()
		defer mu.Unlock()
		sk := aws.ToString(raw[store.AttrSK].S)
		asked[sk]++
		return (sk == "n/1" || sk == "n/3") && asked[sk] <= 2
	})
	t.Cleanup(mini.ClearUnprocessedItems)
	items, err := tbl.BatchGet(ctx, ks)
	must(t, err)
	if len(items) != 5 {
		t.Fatalf("BatchGet gave %d items, want all 5 after retrying the unprocessed ones", len(items))
	}
	for i, it := range items {
		if it.Key != ks[i] {
			t.Fatalf("item %d is %v, want %v (key order)", i, it.Key, ks[i])
		}
	}
}

func TestBatchGetStillUnprocessedIsUnavailable(t *testing.T) {
	mini := minidyn.NewServer()
	tbl, name := tableOn(t, mini)
	ctx := t.Context()
	k := store.Key{PK: "p", SK: "n/1"}
	must(t, tbl.Create(ctx, store.Item{Key: k, Body: []byte(`1`)}))
	mini.EmulateUnprocessedItems(name, func(int, map[string]*minidyn.AttributeValue) bool { return true })
	t.Cleanup(mini.ClearUnprocessedItems)
	_, err := tbl.BatchGet(ctx, []store.Key{k})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("BatchGet with keys never processed = %v, want ErrUnavailable", err)
	}
}

// tableOn is a table on a given minidyn server (for its failure emulation),
// behind the fidelity wrapper.
func tableOn(t *testing.T, mini *minidyn.Server) (*dynamo.Table, string) {
	ddb := awstest.StartDynamoDBOn(t, mini)
	name := ddb.CreateTable(t)
	return dynamo.New(ddb.Client, name), name
}

// The oversize check happens in the adapter before any request; the
// server's own refusal (here the fidelity wrapper's ValidationException)
// must map to the same error for items the adapter cannot measure.
func TestServerSizeRefusalIsTooLarge(t *testing.T) {
	ddb := awstest.StartDynamoDB(t)
	name := ddb.CreateTable(t)
	ddb.Faults.Add(awstest.Operation("PutItem"), 1,
		awstest.DynamoDBError(http.StatusBadRequest, "ValidationException", "Item size has exceeded the maximum allowed size"))
	err := dynamo.New(ddb.Client, name).Create(t.Context(), store.Item{Key: store.Key{PK: "p", SK: "s"}, Body: []byte("small")})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Create refused for size by the server = %v, want ErrTooLarge", err)
	}
}

func TestErrorMappingOverTheWire(t *testing.T) {
	tests := []struct {
		name   string
		answer awstest.Answer
		want   error
	}{
		{"Throttling", awstest.DynamoDBError(400, "ThrottlingException", "Rate exceeded"), store.ErrUnavailable},
		{"ProvisionedThroughputExceeded", awstest.DynamoDBError(400, "ProvisionedThroughputExceededException", "too fast"), store.ErrUnavailable},
		{"RequestLimitExceeded", awstest.DynamoDBError(400, "RequestLimitExceeded", "account limit"), store.ErrUnavailable},
		{"InternalServerError", awstest.DynamoDBError(500, "InternalServerError", "boom"), store.ErrUnavailable},
		{"ServiceUnavailable", awstest.DynamoDBError(503, "ServiceUnavailable", "down"), store.ErrUnavailable},
		{"ItemCollectionSizeLimit", awstest.DynamoDBError(400, "ItemCollectionSizeLimitExceededException", "collection full"), store.ErrTooLarge},
		{"ConditionalCheckFailed", awstest.DynamoDBError(400, "ConditionalCheckFailedException", "The conditional request failed"), store.ErrConditionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ddb := awstest.StartDynamoDB(t)
			tbl := dynamo.New(ddb.Client, ddb.CreateTable(t))
			ddb.Faults.Add(awstest.Operation("PutItem"), -1, tt.answer)
			err := tbl.Create(t.Context(), store.Item{Key: store.Key{PK: "p", SK: "s"}, Body: []byte(`{}`)})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Create = %v, want %v", err, tt.want)
			}
			for _, other := range []error{store.ErrUnavailable, store.ErrTooLarge, store.ErrConditionFailed, store.ErrNotFound} {
				if other != tt.want && errors.Is(err, other) {
					t.Fatalf("Create = %v: also reads as %v", err, other)
				}
			}
		})
	}
}

func TestPlainValidationErrorIsNotAnOutage(t *testing.T) {
	ddb := awstest.StartDynamoDB(t)
	tbl := dynamo.New(ddb.Client, ddb.CreateTable(t))
	ddb.Faults.Add(awstest.Operation("GetItem"), -1, awstest.DynamoDBError(400, "ValidationException", "One or more parameter values were invalid"))
	_, err := tbl.Get(t.Context(), store.Key{PK: "p", SK: "s"})
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get answered ValidationException = %v, want a plain error", err)
	}
}

func TestMinidynInternalFailureIsUnavailable(t *testing.T) {
	mini := minidyn.NewServer()
	tbl, _ := tableOn(t, mini)
	mini.EmulateFailure(minidyn.FailureConditionInternalServerError)
	t.Cleanup(func() { mini.EmulateFailure(minidyn.FailureConditionNone) })
	ctx := t.Context()
	k := store.Key{PK: "p", SK: "s"}
	calls := map[string]func() error{
		"Get":      func() error { _, err := tbl.Get(ctx, k); return err },
		"Create":   func() error { return tbl.Create(ctx, store.Item{Key: k, Body: []byte(`{}`)}) },
		"Update":   func() error { return tbl.Update(ctx, store.Item{Key: k, Version: 2, Body: []byte(`{}`)}) },
		"Query":    func() error { _, err := tbl.Query(ctx, store.Query{PK: "p"}); return err },
		"BatchGet": func() error { _, err := tbl.BatchGet(ctx, []store.Key{k}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s during an internal failure = %v, want ErrUnavailable", name, err)
		}
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	ddb := awstest.StartDynamoDB(t)
	tbl := dynamo.New(ddb.Client, ddb.CreateTable(t))
	ddb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := tbl.Get(ctx, store.Key{PK: "p", SK: "s"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get with the server gone = %v, want ErrUnavailable", err)
	}
}

func TestInvalidArgumentsAreRefusedBeforeAnyRequest(t *testing.T) {
	tbl, _, _ := newTable(t)
	ctx := t.Context()
	if err := tbl.Create(ctx, store.Item{Key: store.Key{PK: "p"}}); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Create with an empty sort key = %v, want a plain error", err)
	}
	if err := tbl.Update(ctx, store.Item{Key: store.Key{PK: "p", SK: "s"}, Version: 1}); !errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("Update to version 1 = %v, want ErrConditionFailed", err)
	}
	if _, err := tbl.Query(ctx, store.Query{}); err == nil {
		t.Error("Query without a partition succeeded")
	}
}

func keys(items []store.Item) []string {
	var ks []string
	for _, it := range items {
		ks = append(ks, it.SK)
	}
	return ks
}

func TestQueryWithHugeLimitReadsEverything(t *testing.T) {
	onBoth(t, func(t *testing.T, newTable func(testing.TB) (*dynamo.Table, *awstest.DynamoDB, string)) {
		tbl, _, _ := newTable(t)
		ctx := t.Context()
		for i := range 3 {
			must(t, tbl.Create(ctx, store.Item{Key: store.Key{PK: "p", SK: fmt.Sprint(i)}, Body: []byte(`{}`)}))
		}
		page, err := tbl.Query(ctx, store.Query{PK: "p", Limit: math.MaxInt})
		must(t, err)
		if len(page.Items) != 3 || page.Next != "" {
			t.Fatalf("Limit MaxInt: %d items next %q, want 3 and no next", len(page.Items), page.Next)
		}
	})
}
