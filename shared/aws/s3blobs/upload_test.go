package s3blobs_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

func TestUploadTargetIsAPresignedPutBoundToSizeTypeAndChecksum(t *testing.T) {
	blobs, _, _ := newBlobs(t)
	ctx := t.Context()
	data := []byte("the bytes of an upload")
	target, err := blobs.UploadTarget(ctx, "uploads/t/abc", store.Upload{Size: int64(len(data)), SHA256: sha256.Sum256(data), ContentType: "image/png"}, time.Minute)
	must(t, err)
	for _, h := range []string{"Content-Length", "Content-Type", "X-Amz-Checksum-Sha256"} {
		if target.Header[h] == "" {
			t.Errorf("the target does not bind %s: %v", h, target.Header)
		}
	}
	send := func(body []byte) int {
		req, err := http.NewRequest(target.Method, target.URL, bytes.NewReader(body))
		must(t, err)
		for k, v := range target.Header {
			if k != "Content-Length" {
				req.Header.Set(k, v)
			}
		}
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	if got := send(bytes.ToUpper(data)); got != http.StatusBadRequest {
		t.Fatalf("another checksum: %d, want 400", got)
	}
	if got := send(data); got != http.StatusOK {
		t.Fatalf("the bytes: %d, want 200", got)
	}
	b, err := blobs.Get(ctx, "uploads/t/abc")
	must(t, err)
	if !bytes.Equal(b.Data, data) || b.ContentType != "image/png" {
		t.Fatalf("stored %q as %q", b.Data, b.ContentType)
	}
	must(t, blobs.Delete(ctx, "uploads/t/abc"))
	if _, err := blobs.Head(ctx, "uploads/t/abc"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	must(t, blobs.Delete(ctx, "uploads/t/abc")) // a missing key is no error
}
