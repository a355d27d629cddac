package sdkbody_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/durachat/durachat/shared/aws/sdkbody"
)

// lateLastLook sends requests as the SDK's client does, but lets the
// transport's last look at a body that can write itself (WriteTo) happen
// only after the SDK has closed the body, which the SDK does as soon as
// Do returns. That is the order a server quicker than the client's write
// loop makes; here it is made every time.
type lateLastLook struct{ transport http.RoundTripper }

func (c lateLastLook) Do(r *http.Request) (*http.Response, error) {
	closed := make(chan struct{})
	if w, ok := r.Body.(io.WriterTo); ok {
		shallow := *r
		shallow.Body = writeToAfterClose{ReadCloser: r.Body, w: w, closed: closed}
		r = &shallow
	}
	res, err := c.transport.RoundTrip(r)
	r.Body.Close() // as the SDK does once the answer's headers are in
	close(closed)
	return res, err
}

type writeToAfterClose struct {
	io.ReadCloser
	w      io.WriterTo
	closed chan struct{}
}

func (b writeToAfterClose) WriteTo(w io.Writer) (int64, error) {
	<-b.closed
	return b.w.WriteTo(w)
}

// valueSize makes the answer far bigger than the connection's buffers, so
// that it is still being read when the transport would close it.
const valueSize = 8 << 20

func TestAnAnswerIsReadWholeThoughTheSDKClosesTheRequestBodyBeforeTheTransportIsDone(t *testing.T) {
	value := strings.Repeat("v", valueSize)
	answer := `{"Item":{"pk":{"S":"` + value + `"}}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		io.WriteString(w, answer)
	}))
	defer srv.Close()

	tests := []struct {
		name       string
		apiOptions []func(*middleware.Stack) error
		wantErr    string
	}{
		// Without the option the race shows, so the case below can fail.
		{name: "the SDK alone", wantErr: "use of closed network connection"},
		{name: "ReadOnly", apiOptions: []func(*middleware.Stack) error{sdkbody.ReadOnly}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transport := &http.Transport{}
			defer transport.CloseIdleConnections()
			client := dynamodb.NewFromConfig(aws.Config{
				Region:           "us-east-1",
				Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
				HTTPClient:       lateLastLook{transport: transport},
				RetryMaxAttempts: 1,
				APIOptions:       tt.apiOptions,
				BaseEndpoint:     aws.String(srv.URL),
			})
			out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String("t"),
				Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GetItem = %v, want an error with %q: the fixture no longer shows the race, and ReadOnly may no longer be needed", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetItem: %v", err)
			}
			if got := out.Item["pk"].(*types.AttributeValueMemberS).Value; len(got) != valueSize {
				t.Fatalf("the item came back with %d bytes, want %d", len(got), valueSize)
			}
		})
	}
}

func TestARetriedRequestSendsItsWholeBodyAgain(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if len(bodies) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"once"}`)
			return
		}
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	client := dynamodb.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		RetryMaxAttempts: 2,
		APIOptions:       []func(*middleware.Stack) error{sdkbody.ReadOnly},
		BaseEndpoint:     aws.String(srv.URL),
	})
	_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String("t"),
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
	})
	if err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	if len(bodies) != 2 || bodies[0] == "" || bodies[1] != bodies[0] {
		t.Fatalf("the server saw bodies %q, want the same whole body twice", bodies)
	}
}
