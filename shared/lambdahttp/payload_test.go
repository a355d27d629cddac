package lambdahttp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// payloadCases are events as Lambda could hand them over, and payloads
// that are not events.
var payloadCases = []string{
	`{"version":"2.0","rawPath":"/v1/x","body":"{\"a\":\"b\\\\n\"}","isBase64Encoded":false,"headers":{"content-type":"application/json"}}`,
	`{"rawPath":"/x","Body":"first","body":"second"}`,
	`{"rawPath":"/x","BODY":"only"}`,
	`{"rawPath":"/x","body":null}`,
	`{"rawPath":"/x","body":12}`,
	`{"rawPath":"/x","body":"\ud800 unpaired"}`,
	"{\"rawPath\":\"/x\",\"body\":\"bad \xff utf-8\"}",
	`{"requestContext":{"http":{"method":"POST","path":"/x"},"timeEpoch":1700000000000},"body":"é\u2028"}`,
	`{"rawPath":1}`, `[]`, `"event"`, `null`, `{`, `{"body":"a"} trailing`, `{}`,
}

func TestDecodeEventDecodesAsEncodingJSON(t *testing.T) {
	for _, p := range payloadCases {
		checkDecodeEvent(t, []byte(p))
	}
}

func FuzzDecodeEventDecodesAsEncodingJSON(f *testing.F) {
	for _, p := range payloadCases {
		f.Add([]byte(p))
	}
	f.Fuzz(checkDecodeEvent)
}

func checkDecodeEvent(t *testing.T, payload []byte) {
	var want events.APIGatewayV2HTTPRequest
	wantErr := json.Unmarshal(payload, &want)
	got, err := DecodeEvent(payload)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: DecodeEvent error %v, json.Unmarshal error %v", payload, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%q: DecodeEvent %+v, json.Unmarshal %+v", payload, got, want)
	}
}

// The answer as Handler sends it is the runtime's encoding of the answer
// Invoke returns, byte for byte: quotes, control bytes, HTML, non-UTF-8
// and line separators in the body and the headers.
func TestHandlerSendsTheAnswerTheRuntimeWouldEncode(t *testing.T) {
	for _, body := range []string{"", `{"view":"<chat>\n0:0|a & b\n</chat>"}`, "\x00\x1f\"\\ bad \xff é \u2028", strings.Repeat("QUJD", 5000)} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; <x>")
			w.Header().Set("X-Body-Bytes", strings.Repeat("\u2029", 2))
			w.Write([]byte(body))
		})
		a := New(h)
		ev := event("GET", "/x", "", nil)
		resp, err := a.Invoke(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(resp); err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(ev)
		got, err := lambda.NewHandler(a.Handler()).Invoke(context.Background(), payload)
		if err != nil {
			t.Fatal(err)
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
			t.Errorf("body %.40q: Handler sent\n%.300s\nthe runtime would send\n%.300s", body, got, w)
		}
		if n := PayloadSize(resp); n != len(got) {
			t.Errorf("body %.40q: PayloadSize %d, sent %d bytes", body, n, len(got))
		}
	}
}
