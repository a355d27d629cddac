package awstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/durachat/durachat/shared/store"
)

func TestItemSizeCountsNamesAndValuesAsDynamoDBDoes(t *testing.T) {
	s := func(v string) attributeValue { return attributeValue{S: &v} }
	n := func(v string) attributeValue { return attributeValue{N: &v} }
	yes := true
	tests := []struct {
		name string
		item map[string]attributeValue
		want int
	}{
		{"String", map[string]attributeValue{"pk": s("abc")}, 2 + 3},
		{"StringIsUTF8Bytes", map[string]attributeValue{"né": s("€")}, 3 + 3},
		{"Binary", map[string]attributeValue{"b": {B: []byte{0, 1, 2, 3}}}, 1 + 4},
		{"NumberOneBytePerTwoDigitsPlusOne", map[string]attributeValue{"v": n("12345")}, 1 + 3 + 1},
		{"NumberTrimsZerosAndSign", map[string]attributeValue{"v": n("-00120.500")}, 1 + 2 + 1},
		{"BoolAndNull", map[string]attributeValue{"x": {BOOL: &yes}, "y": {NULL: &yes}}, 1 + 1 + 1 + 1},
		{"List", map[string]attributeValue{"l": {L: []attributeValue{s("ab"), s("c")}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"Map", map[string]attributeValue{"m": {M: map[string]attributeValue{"k": s("vv")}}}, 1 + 3 + 1 + 1 + 2},
		{"StringSet", map[string]attributeValue{"ss": {SS: []string{"a", "bc"}}}, 2 + 3},
		{"SeveralAttributes", map[string]attributeValue{"pk": s("p"), "sk": s("s"), "b": {B: make([]byte, 10)}}, 3 + 3 + 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := itemSize(tt.item); got != tt.want {
				t.Fatalf("itemSize = %d, want %d", got, tt.want)
			}
		})
	}
}

// The wrapper counts a store item exactly as store.Item.Size does, apart
// from numbers, which store counts generously.
func TestItemSizeAgreesWithStoreForBinaryBodies(t *testing.T) {
	it := store.Item{Key: store.Key{PK: "chat/t/c", SK: "e/000001"}, Body: make([]byte, 1000)}
	v := "1"
	item := map[string]attributeValue{
		store.AttrPK: {S: &it.PK}, store.AttrSK: {S: &it.SK},
		store.AttrVersion: {N: &v}, store.AttrBody: {B: it.Body},
	}
	if got, limit := itemSize(item), it.Size(); got > limit || limit-got > 21 {
		t.Fatalf("wrapper counts %d bytes, store %d: store must count at least as much, and only the number generously", got, limit)
	}
}

// dynamoDB starts minidyn behind the wrapper, with a fresh table.
func dynamoDB(t *testing.T) (*DynamoDB, string) {
	d := StartDynamoDB(t)
	return d, d.CreateTable(t)
}

// bodyOf is an item whose size as DynamoDB counts it is exactly size.
func bodyOf(size int) map[string]types.AttributeValue {
	pk, sk := "p", "s"
	overhead := len("pk") + len(pk) + len("sk") + len(sk) + len("b")
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
		"b":  &types.AttributeValueMemberB{Value: make([]byte, size-overhead)},
	}
}

func TestPutItemOverFourHundredKilobytesIsRefused(t *testing.T) {
	d, table := dynamoDB(t)
	ctx := t.Context()
	_, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: bodyOf(store.MaxItemSize + 1)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" || api.ErrorMessage() != "Item size has exceeded the maximum allowed size" {
		t.Fatalf("PutItem of 400 KB + 1 = %v, want DynamoDB's ValidationException", err)
	}
	key := bodyOf(8)
	delete(key, "b")
	got, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if got.Item != nil {
		t.Fatalf("after a refused put the item is there: %v", got.Item)
	}
	if _, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: bodyOf(store.MaxItemSize)}); err != nil {
		t.Fatalf("PutItem of exactly 400 KB = %v, want success", err)
	}
}

func TestBatchAndTransactPutsOverTheLimitAreRefused(t *testing.T) {
	d, table := dynamoDB(t)
	ctx := t.Context()
	_, err := d.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		table: {{PutRequest: &types.PutRequest{Item: bodyOf(store.MaxItemSize + 1)}}},
	}})
	if !isValidation(err) {
		t.Errorf("BatchWriteItem with an oversize put = %v, want ValidationException", err)
	}
	_, err = d.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: bodyOf(store.MaxItemSize + 1)}},
	}})
	if !isValidation(err) {
		t.Errorf("TransactWriteItems with an oversize put = %v, want ValidationException", err)
	}
}

func isValidation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException" && strings.Contains(api.ErrorMessage(), "has exceeded the maximum allowed size")
}

func TestUpdateItemGrowingPastTheLimitIsRefusedAndUndone(t *testing.T) {
	d, table := dynamoDB(t)
	ctx := t.Context()
	small := bodyOf(1000)
	if _, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: small}); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": small["pk"], "sk": small["sk"]}
	_, err := d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          aws.String("SET extra = :x"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberB{Value: make([]byte, store.MaxItemSize)}},
	})
	if !isValidation(err) {
		t.Fatalf("UpdateItem past the limit = %v, want ValidationException", err)
	}
	got, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	wantLen := len(small["b"].(*types.AttributeValueMemberB).Value)
	if _, ok := got.Item["extra"]; ok || len(got.Item["b"].(*types.AttributeValueMemberB).Value) != wantLen {
		t.Fatalf("after a refused update the item has %d attributes; want it as before", len(got.Item))
	}
	// An update that fits goes through.
	_, err = d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          aws.String("SET extra = :x"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "ok"}},
	})
	if err != nil {
		t.Fatalf("UpdateItem within the limit = %v", err)
	}
}

func TestUpdateItemCreatingAnOversizeItemLeavesNothing(t *testing.T) {
	d, table := dynamoDB(t)
	ctx := t.Context()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "new"}, "sk": &types.AttributeValueMemberS{Value: "s"}}
	_, err := d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          aws.String("SET b = :x"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberB{Value: make([]byte, store.MaxItemSize)}},
	})
	if !isValidation(err) {
		t.Fatalf("UpdateItem creating an oversize item = %v, want ValidationException", err)
	}
	got, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if got.Item != nil {
		t.Fatalf("after the refused update the item is there: %v", got.Item)
	}
}

func TestTableStatusIsActive(t *testing.T) {
	d, table := dynamoDB(t)
	out, err := d.Client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.TableStatus != types.TableStatusActive || aws.ToString(out.Table.TableName) != table {
		t.Fatalf("DescribeTable: status %q name %q, want ACTIVE and the table", out.Table.TableStatus, aws.ToString(out.Table.TableName))
	}
}

func TestEveryAnswerCarriesItsCRC32(t *testing.T) {
	d, table := dynamoDB(t)
	for _, req := range []struct{ target, body string }{
		{"DescribeTable", `{"TableName":"` + table + `"}`},
		{"GetItem", `{"TableName":"` + table + `","Key":{"pk":{"S":"p"},"sk":{"S":"s"}}}`},
		{"GetItem", `{"TableName":"missing","Key":{"pk":{"S":"p"},"sk":{"S":"s"}}}`}, // an error
	} {
		r, err := http.NewRequest(http.MethodPost, d.URL, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("X-Amz-Target", "DynamoDB_20120810."+req.target)
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)
		if got := res.Header.Get("X-Amz-Crc32"); got != want {
			t.Errorf("%s (%d): X-Amz-Crc32 %q, want %q", req.target, res.StatusCode, got, want)
		}
	}
}

func TestQueryFromAMissingStartKeyStartsWhereItWouldSort(t *testing.T) {
	d, table := dynamoDB(t)
	ctx := t.Context()
	for _, sk := range []string{"e/0", "e/2", "e/4"} {
		item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: sk}}
		if _, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	start := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: "e/1"}}
	out, err := d.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p"}},
		ExclusiveStartKey:         start,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range out.Items {
		got = append(got, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	if strings.Join(got, " ") != "e/2 e/4" {
		t.Fatalf("Query after missing e/1 = %q, want [e/2 e/4]", got)
	}
	// The placeholder is gone.
	left, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: start})
	if err != nil {
		t.Fatal(err)
	}
	if left.Item != nil {
		t.Fatalf("start key placeholder left behind: %v", left.Item)
	}
}

func TestFaultsAnswerTheGivenNumberOfTimes(t *testing.T) {
	d, table := dynamoDB(t)
	d.Faults.Add(Operation("DescribeTable"), 1, DynamoDBError(500, "InternalServerError", "injected"))
	// Config retries once, so one fault is absorbed by the SDK's retry;
	// two in a row reach the caller.
	in := &dynamodb.DescribeTableInput{TableName: aws.String(table)}
	if _, err := d.Client.DescribeTable(t.Context(), in); err != nil {
		t.Fatalf("one fault with one retry = %v, want success", err)
	}
	d.Faults.Add(Operation("DescribeTable"), 2, DynamoDBError(500, "InternalServerError", "injected"))
	if _, err := d.Client.DescribeTable(t.Context(), in); err == nil {
		t.Fatal("two faults in a row were absorbed")
	}
	if _, err := d.Client.DescribeTable(t.Context(), in); err != nil {
		t.Fatalf("after the faults ran out: %v", err)
	}
	d.Faults.Add(Operation("DescribeTable"), -1, DynamoDBError(500, "InternalServerError", "injected"))
	d.Faults.Clear()
	if _, err := d.Client.DescribeTable(t.Context(), in); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

func TestRequestsOverSixteenMegabytesAreRefused(t *testing.T) {
	d := StartDynamoDB(t)
	body := bytes.Repeat([]byte(" "), maxRequestBody+1)
	r, _ := http.NewRequest(http.MethodPost, d.URL, bytes.NewReader(body))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct {
		Type string `json:"__type"`
	}
	json.NewDecoder(res.Body).Decode(&e)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.HasSuffix(e.Type, "RequestEntityTooLarge") {
		t.Fatalf("oversize request: %d %q", res.StatusCode, e.Type)
	}
}
