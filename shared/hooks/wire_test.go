package hooks

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/testenv"
)

// S3 itself failing, on the wire (not a fake store): the S3 adapter maps
// the answers, and the hooks degrade as they do for any outage. A failed
// put keeps the image inline and says so; a failed read leaves the ref as
// text, reported, and the request still answers 200.
func TestS3OutageOnTheWireKeepsImagesInlineAndRefsText(t *testing.T) {
	s3 := awstest.StartS3(t)
	blobs := s3blobs.New(s3.Client, s3.CreateBucket(t))
	e := newEnv(t, testenv.Backend{Name: "aws", Blobs: blobs, Linker: blobs})

	t.Run("put", func(t *testing.T) {
		a, b := pngB64(t, 61, 8, 8), pngB64(t, 62, 8, 8)
		s3.Faults.Add(awstest.Method(http.MethodPut), -1, awstest.S3Error(http.StatusServiceUnavailable, "SlowDown", "Reduce your request rate"))
		defer s3.Faults.Clear()
		var got afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", afterTool(obj{"name": "shot"}, list{imageBlock(a), textBlock("t"), imageBlock(b)}), &got)
		want := []InlineImage{{Index: 0, Reason: ReasonUnavailable}, {Index: 2, Reason: ReasonUnavailable}}
		if !slices.Equal(got.Inline, want) || len(got.Stored) != 0 {
			t.Fatalf("inline %+v stored %v, want both images inline as unavailable", got.Inline, got.Stored)
		}
		for i, b64 := range map[int]string{0: a, 2: b} {
			var data string
			json.Unmarshal(got.Result.Content[i]["data"], &data)
			if data != b64 {
				t.Fatalf("block %d is not the image as it came", i)
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		a, b := pngB64(t, 63, 8, 8), pngB64(t, 64, 8, 8)
		na, nb := e.put(t, tenantA, a), e.put(t, tenantA, b)
		s3.Faults.Add(func(r *http.Request) bool {
			return r.Method == http.MethodGet && keyHasName(nb)(r.URL.Path)
		}, -1, awstest.S3Error(http.StatusInternalServerError, "InternalError", "We encountered an internal error"))
		defer s3.Faults.Clear()
		for _, format := range []string{FormatPi, FormatAnthropic, FormatOpenAI} {
			req := obj{"messages": list{obj{"role": "user", "content": list{textBlock(refs.Ref(na)), textBlock(refs.Ref(nb))}}}}
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", restoreBody(format, req), &got)
			if !slices.Equal(got.Restored, []string{na}) || !slices.Equal(got.Unrestored, []Unrestored{{Name: nb, Reason: ReasonUnavailable}}) {
				t.Fatalf("%s: restored %v unrestored %v", format, got.Restored, got.Unrestored)
			}
			var r struct {
				Messages []struct{ Content []map[string]any }
			}
			json.Unmarshal(got.Request, &r)
			if c := r.Messages[0].Content; c[1]["text"] != refs.Ref(nb) || c[0]["type"] == "text" {
				t.Fatalf("%s: content %v", format, c)
			}
		}
	})
}
