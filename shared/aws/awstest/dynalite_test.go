package awstest

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// The adapter's tests run on dynalite for three rules minidyn does not
// enforce; these checks keep that meaningful: dynalite itself must refuse
// or page as DynamoDB does.
func TestDynaliteEnforcesWhatMinidynLetsPass(t *testing.T) {
	d := StartDynalite(t)
	name := d.CreateTable(t)
	ctx := t.Context()
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	big := strings.Repeat("x", 300<<10)
	for _, sk := range []string{"a", "b", "c", "d", "e"} {
		item := key(sk)
		item["b"] = &types.AttributeValueMemberS{Value: big}
		if _, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	validation := func(err error) bool {
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
	}

	t.Run("AQueryPageStopsAtOneMegabyte", func(t *testing.T) {
		out, err := d.Client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(name),
			KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) >= 5 || out.LastEvaluatedKey == nil {
			t.Fatalf("a query over 1.5 MB gave %d items and LastEvaluatedKey %v in one page", len(out.Items), out.LastEvaluatedKey)
		}
	})

	t.Run("ABatchGetNamingAKeyTwiceIsRefused", func(t *testing.T) {
		_, err := d.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			name: {Keys: []map[string]types.AttributeValue{key("a"), key("a")}}}})
		if !validation(err) {
			t.Fatalf("BatchGetItem with a repeated key = %v, want a ValidationException", err)
		}
	})

	t.Run("AQueryStartingOutsideItsKeyConditionIsRefused", func(t *testing.T) {
		_, err := d.Client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(name),
			KeyConditionExpression:    aws.String("pk = :p AND begins_with(sk, :s)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p"}, ":s": &types.AttributeValueMemberS{Value: "c"}},
			ExclusiveStartKey:         key("a")})
		if !validation(err) {
			t.Fatalf("a query starting outside begins_with = %v, want a ValidationException", err)
		}
	})
}

// A client that goes away mid-request (a cancelled context closes its
// connection) must not take the shared server down with it: DynamoDB
// just drops such a request, and every later test would fail otherwise.
func TestDynaliteOutlivesAClientThatGoesAwayMidRequest(t *testing.T) {
	d := StartDynalite(t)
	for range 3 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(dynalite.endpoint, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: local\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Li")
		time.Sleep(50 * time.Millisecond) // the server has begun reading the body
		conn.Close()
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := d.Client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("after clients went away mid-request: %v", err)
	}
}
