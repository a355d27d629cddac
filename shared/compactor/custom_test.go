package compactor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
)

// host is a custom compactor endpoint; answer writes its response.
func host(t *testing.T, answer func(w http.ResponseWriter, req compactor.CustomRequest, raw map[string]any)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req compactor.CustomRequest
		var raw map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("payload: %v", err)
		}
		json.Unmarshal(body, &raw)
		answer(w, req, raw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func lineReply(w http.ResponseWriter, line string) {
	json.NewEncoder(w).Encode(map[string]string{"line": line})
}

func TestHTTPCompactorSendsTaskSourceAndImages(t *testing.T) {
	a := named("a", pngOf(t, 4, 4, red))
	var got compactor.CustomRequest
	srv := host(t, func(w http.ResponseWriter, req compactor.CustomRequest, raw map[string]any) {
		got = req
		if _, ok := raw["images"].([]any); !ok {
			t.Errorf("images is not a list: %v", raw["images"])
		}
		lineReply(w, "host line")
	})
	c := &compactor.HTTPCompactor{URL: srv.URL}
	in := leaf("user: see "+refOf(a), a)
	out, err := c.Compact(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Line != "host line" || out.Verbatim || out.Attached != 1 || out.Model != "http:"+srv.URL {
		t.Fatalf("out = %+v", out)
	}
	if got.Source != in.Source || got.Level != 0 || got.Index != 5 || got.Label != "5+1" || got.Kind != "user" ||
		got.Context != view || !strings.Contains(got.Task, "at most 512 bytes") {
		t.Fatalf("request = %+v", got)
	}
	if len(got.Images) != 1 || got.Images[0].Name != a.Name || got.Images[0].MimeType != "image/png" || !bytes.Equal(got.Images[0].Data, a.Data) {
		t.Fatalf("images = %+v", got.Images)
	}
}

func TestHTTPCompactorMergeHasAnEmptyImageList(t *testing.T) {
	srv := host(t, func(w http.ResponseWriter, req compactor.CustomRequest, raw map[string]any) {
		if list, ok := raw["images"].([]any); !ok || len(list) != 0 {
			t.Errorf("images = %v, want []", raw["images"])
		}
		if !strings.Contains(req.Task, "Merge lines 0+1 and 1+1") {
			t.Errorf("task = %q", req.Task)
		}
		lineReply(w, "merged")
	})
	in := memory.CompactRequest{Level: 1, Index: 0, Label: "0+2", Context: view, Source: long(400) + "\n" + long(400), Images: []model.Image{}}
	if _, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func TestCustomCompactorReturningTheSourceKeepsItWordForWord(t *testing.T) {
	a := named("a", pngOf(t, 4, 4, red))
	srv := host(t, func(w http.ResponseWriter, req compactor.CustomRequest, _ map[string]any) { lineReply(w, req.Source) })
	for _, in := range []memory.CompactRequest{leaf("user:\n  look "+refOf(a), a), leaf(long(900))} {
		out, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), in)
		if err != nil || !out.Verbatim || out.Line != in.Source {
			t.Fatalf("out %+v, err %v", out, err)
		}
	}
}

func TestHTTPCompactorLineIsCleanedAndCutToTheLimit(t *testing.T) {
	srv := host(t, func(w http.ResponseWriter, _ compactor.CustomRequest, _ map[string]any) {
		lineReply(w, "5+1| "+strings.Repeat("q", 700)+"\n")
	})
	out, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), leaf(long(900)))
	if err != nil || out.Line != strings.Repeat("q", 512) {
		t.Fatalf("line of %d bytes, err %v", len(out.Line), err)
	}
}

func TestHTTPCompactorErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		retryable bool
	}{
		{"throttled", 429, `{}`, true},
		{"server error", 502, `oops`, true},
		{"bad request", 400, `{"error":"no"}`, false},
		{"unauthorized", 401, ``, false},
		{"no line", 200, `{"other":1}`, true},
		{"not json", 200, `<html>`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := host(t, func(w http.ResponseWriter, _ compactor.CustomRequest, _ map[string]any) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), leaf(long(900)))
			if err == nil || model.IsRetryable(err) != tt.retryable {
				t.Fatalf("err %v, retryable %v", err, model.IsRetryable(err))
			}
		})
	}
	// Nothing listening: a transport error, retryable.
	srv := host(t, nil)
	srv.Close()
	_, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), leaf(long(900)))
	if !model.IsRetryable(err) {
		t.Fatalf("closed endpoint: %v", err)
	}
}

// lambdaServer speaks the Lambda Invoke API.
func lambdaServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, payload compactor.CustomRequest)) (*httptest.Server, *[]*http.Request) {
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r)
		body, _ := io.ReadAll(r.Body)
		var req compactor.CustomRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("payload: %v", err)
		}
		answer(w, r, req)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func lambdaInvoker(url string) *compactor.LambdaInvoker {
	client := lambda.NewFromConfig(aws.Config{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		RetryMaxAttempts: 1,
	}, func(o *lambda.Options) { o.BaseEndpoint = aws.String(url) })
	return &compactor.LambdaInvoker{Client: client}
}

func TestLambdaCompactorInvokesTheFunctionSigned(t *testing.T) {
	srv, seen := lambdaServer(t, func(w http.ResponseWriter, _ *http.Request, req compactor.CustomRequest) {
		lineReply(w, "from lambda: "+req.Label)
	})
	c := &compactor.LambdaCompactor{Function: "summarize:live", Invoker: lambdaInvoker(srv.URL)}
	out, err := c.Compact(context.Background(), leaf(long(900)))
	if err != nil || out.Line != "from lambda: 5+1" || out.Model != "lambda:summarize:live" {
		t.Fatalf("out %+v, err %v", out, err)
	}
	r := (*seen)[0]
	if r.Method != http.MethodPost || r.URL.EscapedPath() != "/2015-03-31/functions/summarize/invocations" || r.URL.Query().Get("Qualifier") != "live" {
		t.Fatalf("%s %s", r.Method, r.URL.EscapedPath())
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(auth, "/eu-west-1/lambda/aws4_request") {
		t.Fatalf("authorization = %q", auth)
	}
	if r.Header.Get("X-Amz-Invocation-Type") != "RequestResponse" {
		t.Fatal("not a synchronous invocation")
	}
}

func TestLambdaErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    string // X-Amz-Function-Error
		errType   string
		retryable bool
	}{
		{"throttled", 429, "", "TooManyRequestsException", true},
		{"service error", 500, "", "ServiceException", true},
		{"no such function", 404, "", "ResourceNotFoundException", false},
		{"denied", 403, "", "AccessDeniedException", false},
		{"function crashed", 200, "Unhandled", "", true},
		{"function raised", 200, "Handled", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := lambdaServer(t, func(w http.ResponseWriter, _ *http.Request, _ compactor.CustomRequest) {
				if tt.header != "" {
					w.Header().Set("X-Amz-Function-Error", tt.header)
				}
				if tt.errType != "" {
					w.Header().Set("X-Amzn-Errortype", tt.errType)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, `{"errorMessage":"scripted"}`)
			})
			c := &compactor.LambdaCompactor{Function: "f", Invoker: lambdaInvoker(srv.URL)}
			_, err := c.Compact(context.Background(), leaf(long(900)))
			if err == nil || model.IsRetryable(err) != tt.retryable {
				t.Fatalf("err %v, retryable %v", err, model.IsRetryable(err))
			}
		})
	}
}

func TestCustomCompactorDescribesTheImagesItIsAskedTo(t *testing.T) {
	a, b := named("a", pngOf(t, 4, 4, red)), named("b", pngOf(t, 5, 5, red))
	tests := []struct {
		name      string
		reply     map[string]any
		wantDescs map[string]string
		wantAsked int
	}{
		{"answered: kept for the named images only",
			map[string]any{"line": "host line", "descriptions": map[string]string{a.Name: "a red\nsquare [x]", b.Name: "not asked", "other": "no such image"}},
			map[string]string{a.Name: "a red square (x)"}, 1},
		{"an empty description is none",
			map[string]any{"line": "host line", "descriptions": map[string]string{a.Name: "  "}},
			map[string]string{}, 1},
		{"a compactor that never describes is not counted as failing to",
			map[string]any{"line": "host line"},
			nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got compactor.CustomRequest
			srv := host(t, func(w http.ResponseWriter, req compactor.CustomRequest, raw map[string]any) {
				got = req
				json.NewEncoder(w).Encode(tt.reply)
			})
			in := leaf("user: see "+refOf(a)+" and "+refOf(b), a, b)
			in.Describe = []string{a.Name} // b has a description already
			out, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Describe, []string{a.Name}) {
				t.Errorf("describe sent = %v, want [%s]", got.Describe, a.Name)
			}
			if !maps.Equal(out.Descriptions, tt.wantDescs) || out.DescribeAsked != tt.wantAsked {
				t.Errorf("descriptions %v asked %d, want %v asked %d", out.Descriptions, out.DescribeAsked, tt.wantDescs, tt.wantAsked)
			}
		})
	}
}

func TestCustomCompactorMergeAsksForNoDescriptions(t *testing.T) {
	var raw map[string]any
	srv := host(t, func(w http.ResponseWriter, req compactor.CustomRequest, r map[string]any) {
		raw = r
		lineReply(w, "merged")
	})
	in := memory.CompactRequest{Level: 1, Index: 2, Label: "4+2", Kind: "merge", Context: view, Source: long(600)}
	if _, err := (&compactor.HTTPCompactor{URL: srv.URL}).Compact(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if list, ok := raw["describe"].([]any); !ok || len(list) != 0 {
		t.Errorf("describe = %v, want []", raw["describe"])
	}
}
