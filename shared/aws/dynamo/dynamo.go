// Package dynamo is the DynamoDB adapter of store.Table: one table with
// string keys pk and sk, a version attribute for optimistic locking and the
// record body as binary.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/durachat/durachat/shared/aws/awsfault"
	"github.com/durachat/durachat/shared/store"
)

const (
	// batchGetMax is DynamoDB's limit of keys in one BatchGetItem.
	batchGetMax = 100
	// batchGetAttempts bounds the rounds spent on UnprocessedKeys before
	// the batch is reported as unavailable.
	batchGetAttempts = 8
	// queryRounds bounds the 1 MB pages one Query call reads. A query that
	// has not filled its page by then returns what it has, with Next set.
	queryRounds = 16
)

// Table is a store.Table on one DynamoDB table.
type Table struct {
	client *dynamodb.Client
	name   string
	// now is the clock that decides whether an item's TTL has passed;
	// DynamoDB deletes expired items only eventually, so reads skip them.
	now func() time.Time
	// backoff is the first pause before retrying unprocessed batch keys.
	backoff time.Duration
}

var _ store.Table = (*Table)(nil)

// New returns the store.Table kept in the DynamoDB table named table, whose
// key schema is pk (hash) and sk (range), both strings.
func New(c *dynamodb.Client, table string) *Table {
	return &Table{client: c, name: table, now: time.Now, backoff: 50 * time.Millisecond}
}

// record is an item as stored. Its attribute names are store's Attr
// constants (checked by a test).
type record struct {
	PK      string `dynamodbav:"pk"`
	SK      string `dynamodbav:"sk"`
	Version int64  `dynamodbav:"v"`
	Body    []byte `dynamodbav:"b,omitempty"`
	Expires int64  `dynamodbav:"ttl,omitempty"`
}

func toRecord(it store.Item) record {
	return record{PK: it.PK, SK: it.SK, Version: it.Version, Body: it.Body, Expires: it.Expires}
}

func (r record) item() store.Item {
	return store.Item{Key: store.Key{PK: r.PK, SK: r.SK}, Version: r.Version, Body: r.Body, Expires: r.Expires}
}

func (t *Table) expired(r record) bool {
	return r.Expires != 0 && t.now().Unix() > r.Expires
}

func keyAttrs(k store.Key) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(struct {
		PK string `dynamodbav:"pk"`
		SK string `dynamodbav:"sk"`
	}{k.PK, k.SK})
}

func checkKey(k store.Key) error {
	if k.PK == "" || k.SK == "" {
		return fmt.Errorf("key %q/%q: partition and sort key must not be empty", k.PK, k.SK)
	}
	return nil
}

// Get returns the item at k, or store.ErrNotFound when there is none or its
// TTL has passed.
func (t *Table) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := checkKey(k); err != nil {
		return store.Item{}, err
	}
	key, err := keyAttrs(k)
	if err != nil {
		return store.Item{}, fmt.Errorf("get %s/%s: %w", k.PK, k.SK, err)
	}
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.name),
		Key:            key,
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Item{}, mapError("get "+k.PK+"/"+k.SK, err)
	}
	if out.Item == nil {
		return store.Item{}, fmt.Errorf("get %s/%s: %w", k.PK, k.SK, store.ErrNotFound)
	}
	var r record
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return store.Item{}, fmt.Errorf("get %s/%s: decode: %w", k.PK, k.SK, err)
	}
	if t.expired(r) {
		return store.Item{}, fmt.Errorf("get %s/%s: expired: %w", k.PK, k.SK, store.ErrNotFound)
	}
	return r.item(), nil
}

// Create writes it with Version 1 when its key is free (or holds only an
// expired item), else store.ErrConditionFailed.
func (t *Table) Create(ctx context.Context, it store.Item) error {
	it.Version = 1
	op := "create " + it.PK + "/" + it.SK
	free := expression.AttributeNotExists(expression.Name(store.AttrPK)).
		Or(expression.Name(store.AttrExpires).LessThan(expression.Value(t.now().Unix())))
	return t.put(ctx, op, it, free)
}

// Update replaces the item when the stored, unexpired version is
// it.Version-1, else store.ErrConditionFailed.
func (t *Table) Update(ctx context.Context, it store.Item) error {
	op := "update " + it.PK + "/" + it.SK
	if it.Version < 2 {
		return fmt.Errorf("%s: version %d cannot follow a stored one: %w", op, it.Version, store.ErrConditionFailed)
	}
	current := expression.Name(store.AttrVersion).Equal(expression.Value(it.Version - 1)).
		And(expression.Or(
			expression.AttributeNotExists(expression.Name(store.AttrExpires)),
			expression.Name(store.AttrExpires).GreaterThanEqual(expression.Value(t.now().Unix())),
		))
	return t.put(ctx, op, it, current)
}

// put writes the whole item under cond. A whole-item put (rather than
// UpdateItem) keeps the pre-write size check exact: the stored item is
// exactly it.
func (t *Table) put(ctx context.Context, op string, it store.Item, cond expression.ConditionBuilder) error {
	if err := checkKey(it.Key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := store.CheckSize(it); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	av, err := attributevalue.MarshalMap(toRecord(it))
	if err != nil {
		return fmt.Errorf("%s: encode: %w", op, err)
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("%s: condition: %w", op, err)
	}
	_, err = t.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(t.name),
		Item:                      av,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return mapError(op, err)
	}
	return nil
}

// Query returns one page of q.PK's items whose sort key starts with
// q.Prefix. DynamoDB answers at most 1 MB per request, so Query follows
// LastEvaluatedKey until the page holds q.Limit items, the partition ends,
// or queryRounds requests were made. q.Limit <= 0 sets no count, and the
// page is one DynamoDB page (about 1 MB), as in the embedded table.
func (t *Table) Query(ctx context.Context, q store.Query) (store.Page, error) {
	op := "query " + q.PK + "/" + q.Prefix
	if q.PK == "" {
		return store.Page{}, fmt.Errorf("%s: partition key must not be empty", op)
	}
	after, empty := startAfter(q)
	if empty {
		return store.Page{}, nil
	}
	in, err := t.queryInput(q, after)
	if err != nil {
		return store.Page{}, fmt.Errorf("%s: %w", op, err)
	}
	var page store.Page
	for round := 1; ; round++ {
		if q.Limit > 0 {
			// One more than needed tells whether another page follows
			// without a trailing empty page.
			in.Limit = aws.Int32(int32(min(q.Limit-len(page.Items), 1<<20) + 1))
		}
		out, err := t.client.Query(ctx, in)
		if err != nil {
			return store.Page{}, mapError(op, err)
		}
		full, err := t.addItems(&page, q.Limit, out.Items)
		if err != nil {
			return store.Page{}, fmt.Errorf("%s: %w", op, err)
		}
		if full || len(out.LastEvaluatedKey) == 0 {
			return page, nil
		}
		if round == queryRounds || q.Limit <= 0 {
			var last record
			if err := attributevalue.UnmarshalMap(out.LastEvaluatedKey, &last); err != nil {
				return store.Page{}, fmt.Errorf("%s: decode last key: %w", op, err)
			}
			page.Next = last.SK
			return page, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// queryInput is the first request of q, starting after the sort key
// after (none when empty).
func (t *Table) queryInput(q store.Query, after string) (*dynamodb.QueryInput, error) {
	kc := expression.Key(store.AttrPK).Equal(expression.Value(q.PK))
	if q.Prefix != "" {
		kc = kc.And(expression.KeyBeginsWith(expression.Key(store.AttrSK), q.Prefix))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, fmt.Errorf("key condition: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(t.name),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(!q.Desc),
		ConsistentRead:            aws.Bool(true),
	}
	if after != "" {
		if in.ExclusiveStartKey, err = keyAttrs(store.Key{PK: q.PK, SK: after}); err != nil {
			return nil, fmt.Errorf("start key: %w", err)
		}
	}
	return in, nil
}

// addItems adds the unexpired items of one answer to page, up to limit
// (none when limit <= 0); full reports that the page holds limit items
// and another follows, page.Next naming where.
func (t *Table) addItems(page *store.Page, limit int, items []map[string]types.AttributeValue) (full bool, err error) {
	for _, raw := range items {
		var r record
		if err := attributevalue.UnmarshalMap(raw, &r); err != nil {
			return false, fmt.Errorf("decode: %w", err)
		}
		if t.expired(r) {
			continue
		}
		if limit > 0 && len(page.Items) == limit {
			page.Next = page.Items[len(page.Items)-1].SK
			return true, nil
		}
		page.Items = append(page.Items, r.item())
	}
	return false, nil
}

// startAfter returns the sort key to start after. DynamoDB refuses a start
// key outside the key condition, so an After that does not itself start
// with the prefix is resolved here: it lies either before every matching
// key (start from the beginning) or after all of them (the page is empty).
func startAfter(q store.Query) (after string, empty bool) {
	if q.After == "" || q.Prefix == "" || strings.HasPrefix(q.After, q.Prefix) {
		return q.After, false
	}
	beforeAll := q.After < q.Prefix
	if q.Desc {
		// Walking down, an After below the prefix range leaves nothing.
		return "", beforeAll
	}
	return "", !beforeAll
}

// BatchGet returns the unexpired items at keys, in the order of keys, with
// missing ones left out. It reads 100 keys per request and retries the keys
// DynamoDB leaves unprocessed, with backoff, a bounded number of times.
func (t *Table) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	found := make(map[store.Key]store.Item, len(keys))
	unique := make([]store.Key, 0, len(keys))
	seen := make(map[store.Key]bool, len(keys))
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
		// DynamoDB refuses a batch that names a key twice.
		if !seen[k] {
			seen[k] = true
			unique = append(unique, k)
		}
	}
	for start := 0; start < len(unique); start += batchGetMax {
		if err := t.batchGet(ctx, unique[start:min(start+batchGetMax, len(unique))], found); err != nil {
			return nil, err
		}
	}
	items := make([]store.Item, 0, len(found))
	for _, k := range keys {
		if it, ok := found[k]; ok {
			items = append(items, it)
		}
	}
	return items, nil
}

func (t *Table) batchGet(ctx context.Context, keys []store.Key, found map[store.Key]store.Item) error {
	op := fmt.Sprintf("batch get of %d keys", len(keys))
	request := &types.KeysAndAttributes{ConsistentRead: aws.Bool(true)}
	for _, k := range keys {
		av, err := keyAttrs(k)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		request.Keys = append(request.Keys, av)
	}
	pause := t.backoff
	for attempt := 1; ; attempt++ {
		out, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{t.name: *request},
		})
		if err != nil {
			return mapError(op, err)
		}
		for _, raw := range out.Responses[t.name] {
			var r record
			if err := attributevalue.UnmarshalMap(raw, &r); err != nil {
				return fmt.Errorf("%s: decode: %w", op, err)
			}
			if !t.expired(r) {
				found[store.Key{PK: r.PK, SK: r.SK}] = r.item()
			}
		}
		left, ok := out.UnprocessedKeys[t.name]
		if !ok || len(left.Keys) == 0 {
			return nil
		}
		if attempt == batchGetAttempts {
			return store.Unavailable(op, fmt.Errorf("%d keys still unprocessed after %d attempts", len(left.Keys), attempt))
		}
		request.Keys = left.Keys
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// mapError turns a DynamoDB error into store's typed errors.
func mapError(op string, err error) error {
	var (
		ccf *types.ConditionalCheckFailedException
		ics *types.ItemCollectionSizeLimitExceededException
		api smithy.APIError
	)
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("%s: %w", op, store.ErrConditionFailed)
	case errors.As(err, &ics):
		return fmt.Errorf("%s: %w: %w", op, store.ErrTooLarge, err)
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException" && strings.Contains(api.ErrorMessage(), "has exceeded the maximum allowed size"):
		// DynamoDB's words for an item over 400 KB, from PutItem
		// ("Item size has exceeded the maximum allowed size") and from
		// UpdateItem ("Item size to update has exceeded ...").
		return fmt.Errorf("%s: %w: %w", op, store.ErrTooLarge, err)
	case awsfault.Transient(err):
		return store.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Delete removes the item at k: unconditionally with version 0, else only
// when the stored version is version (store.ErrConditionFailed otherwise).
func (t *Table) Delete(ctx context.Context, k store.Key, version int64) error {
	op := "delete " + k.PK + "/" + k.SK
	if err := checkKey(k); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	key, err := keyAttrs(k)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	in := &dynamodb.DeleteItemInput{TableName: aws.String(t.name), Key: key}
	if version != 0 {
		expr, err := expression.NewBuilder().WithCondition(
			expression.Name(store.AttrVersion).Equal(expression.Value(version))).Build()
		if err != nil {
			return fmt.Errorf("%s: condition: %w", op, err)
		}
		in.ConditionExpression = expr.Condition()
		in.ExpressionAttributeNames = expr.Names()
		in.ExpressionAttributeValues = expr.Values()
	}
	if _, err := t.client.DeleteItem(ctx, in); err != nil {
		return mapError(op, err)
	}
	return nil
}
