package s3blobs_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storetest"
)

func newBlobs(t testing.TB) (*s3blobs.Blobs, *awstest.S3, string) {
	srv := awstest.StartS3(t)
	bucket := srv.CreateBucket(t)
	return s3blobs.New(srv.Client, bucket), srv, bucket
}

func TestBlobsConformance(t *testing.T) {
	storetest.TestBlobs(t, func(t *testing.T) store.Blobs {
		b, _, _ := newBlobs(t)
		return b
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPutIsConditionalAndCarriesSHA256(t *testing.T) {
	blobs, srv, bucket := newBlobs(t)
	ctx := t.Context()
	var mu sync.Mutex
	var seen []http.Header
	// A fault rule that never fires, to see what the adapter sends.
	srv.Faults.Add(func(r *http.Request) bool {
		if r.Method == http.MethodPut {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
		}
		return false
	}, -1, awstest.Answer{})

	data := []byte("some image bytes")
	must(t, blobs.Put(ctx, "images/t/abc", store.Blob{ContentType: "image/png", Data: data}))
	sum := sha256.Sum256(data)
	want := base64.StdEncoding.EncodeToString(sum[:])
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("%d PUT requests, want 1", len(seen))
	}
	if h := seen[0]; h.Get("If-None-Match") != "*" || h.Get("X-Amz-Checksum-Sha256") != want || h.Get("Content-Type") != "image/png" {
		t.Fatalf("PUT headers If-None-Match %q, checksum %q, type %q; want *, %q, image/png",
			h.Get("If-None-Match"), h.Get("X-Amz-Checksum-Sha256"), h.Get("Content-Type"), want)
	}
	out, err := srv.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("images/t/abc"), ChecksumMode: types.ChecksumModeEnabled})
	must(t, err)
	out.Body.Close()
	if aws.ToString(out.ChecksumSHA256) != want {
		t.Fatalf("stored checksum %q, want %q", aws.ToString(out.ChecksumSHA256), want)
	}
}

func TestPreconditionFailedMeansStoredAlready(t *testing.T) {
	blobs, srv, _ := newBlobs(t)
	ctx := t.Context()
	// S3 answers 412 when the key holds an object already; the adapter
	// takes it as success without reading anything.
	srv.Faults.Add(awstest.Method(http.MethodPut), 1, awstest.S3Error(http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
	must(t, blobs.Put(ctx, "k", store.Blob{ContentType: "text/plain", Data: []byte("x")}))
}

func TestConcurrentCreateConflictIsRetried(t *testing.T) {
	blobs, srv, _ := newBlobs(t)
	ctx := t.Context()
	srv.Faults.Add(awstest.Method(http.MethodPut), 2, awstest.S3Error(http.StatusConflict, "ConditionalRequestConflict", "A conflicting conditional operation is currently in progress"))
	must(t, blobs.Put(ctx, "k", store.Blob{ContentType: "text/plain", Data: []byte("x")}))
	got, err := blobs.Get(ctx, "k")
	must(t, err)
	if string(got.Data) != "x" {
		t.Fatalf("after retried conflicts: %q, want the object", got.Data)
	}
}

func TestEndlessConflictWithNothingStoredIsUnavailable(t *testing.T) {
	blobs, srv, _ := newBlobs(t)
	srv.Faults.Add(awstest.Method(http.MethodPut), -1, awstest.S3Error(http.StatusConflict, "ConditionalRequestConflict", "conflict"))
	err := blobs.Put(t.Context(), "k", store.Blob{Data: []byte("x")})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put under endless conflicts = %v, want ErrUnavailable", err)
	}
}

func TestEndlessConflictWithTheObjectStoredSucceeds(t *testing.T) {
	blobs, srv, _ := newBlobs(t)
	ctx := t.Context()
	must(t, blobs.Put(ctx, "k", store.Blob{Data: []byte("first")}))
	srv.Faults.Add(awstest.Method(http.MethodPut), -1, awstest.S3Error(http.StatusConflict, "ConditionalRequestConflict", "conflict"))
	must(t, blobs.Put(ctx, "k", store.Blob{Data: []byte("second")}))
}

func TestOutagesAreUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		method string
		answer awstest.Answer
		call   func(*s3blobs.Blobs) error
	}{
		{"PutSlowDown", http.MethodPut, awstest.S3Error(503, "SlowDown", "Reduce your request rate"),
			func(b *s3blobs.Blobs) error { return b.Put(t.Context(), "k", store.Blob{Data: []byte("x")}) }},
		{"PutInternalError", http.MethodPut, awstest.S3Error(500, "InternalError", "We encountered an internal error"),
			func(b *s3blobs.Blobs) error { return b.Put(t.Context(), "k", store.Blob{Data: []byte("x")}) }},
		{"GetInternalError", http.MethodGet, awstest.S3Error(500, "InternalError", "boom"),
			func(b *s3blobs.Blobs) error { _, err := b.Get(t.Context(), "k"); return err }},
		{"HeadServiceUnavailable", http.MethodHead, awstest.Answer{Status: 503},
			func(b *s3blobs.Blobs) error { _, err := b.Head(t.Context(), "k"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blobs, srv, _ := newBlobs(t)
			srv.Faults.Add(awstest.Method(tt.method), -1, tt.answer)
			err := tt.call(blobs)
			if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
				t.Fatalf("= %v, want ErrUnavailable only", err)
			}
		})
	}
}

func TestAccessDeniedIsNeitherMissingNorOutage(t *testing.T) {
	blobs, srv, _ := newBlobs(t)
	srv.Faults.Add(awstest.Method(http.MethodGet), -1, awstest.S3Error(403, "AccessDenied", "Access Denied"))
	_, err := blobs.Get(t.Context(), "k")
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get refused access = %v, want a plain error", err)
	}
}

func TestMissingBucketIsNotAMissingObject(t *testing.T) {
	srv := awstest.StartS3(t)
	blobs := s3blobs.New(srv.Client, "no-such-bucket")
	if _, err := blobs.Get(t.Context(), "k"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get from a missing bucket = %v, want an error other than ErrNotFound", err)
	}
}

func TestPresignedURLIsFetchableWithoutCredentials(t *testing.T) {
	blobs, _, _ := newBlobs(t)
	ctx := t.Context()
	key := "images/te%40nant/0123456789abcdef"
	must(t, blobs.Put(ctx, key, store.Blob{ContentType: "image/webp", Data: []byte("RIFF....WEBP")}))
	link, err := blobs.URL(ctx, key, store.LinkChat{Tenant: "te@nant", Chat: "c"}, 5*time.Minute)
	must(t, err)
	res, err := http.Get(link)
	must(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	must(t, err)
	if res.StatusCode != http.StatusOK || string(body) != "RIFF....WEBP" || res.Header.Get("Content-Type") != "image/webp" {
		t.Fatalf("GET presigned URL: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	// A presigned URL cannot be revoked: none outlives MaxLinkTTL.
	for _, ttl := range []time.Duration{0, s3blobs.MaxLinkTTL + time.Second} {
		if _, err := blobs.URL(ctx, key, store.LinkChat{}, ttl); err == nil {
			t.Fatalf("URL for %s succeeded", ttl)
		}
	}
}
