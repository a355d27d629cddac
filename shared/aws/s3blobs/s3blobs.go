// Package s3blobs is the S3 adapter of store.Blobs (create-once objects)
// and store.Linker (presigned GET URLs).
package s3blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/durachat/durachat/shared/aws/awsfault"
	"github.com/durachat/durachat/shared/store"
)

// conflictAttempts bounds the puts made while S3 reports a concurrent
// create of the same key (409 ConditionalRequestConflict).
const conflictAttempts = 4

// Blobs is a store.Blobs and store.Linker on one S3 bucket.
type Blobs struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	// backoff is the first pause after a 409, doubled each time.
	backoff time.Duration
}

var (
	_ store.Blobs    = (*Blobs)(nil)
	_ store.Linker   = (*Blobs)(nil)
	_ store.Uploader = (*Blobs)(nil)
)

// New returns the blobs kept in bucket.
func New(c *s3.Client, bucket string) *Blobs {
	return &Blobs{client: c, presign: s3.NewPresignClient(c), bucket: bucket, backoff: 50 * time.Millisecond}
}

// Put stores b under key unless key holds an object already, in which case
// the stored object stays and Put succeeds. The object carries its SHA-256
// so S3 refuses it when it arrives damaged.
func (s *Blobs) Put(ctx context.Context, key string, b store.Blob) error {
	op := "put blob " + key
	if key == "" {
		return fmt.Errorf("%s: key must not be empty", op)
	}
	sum := sha256.Sum256(b.Data)
	checksum := base64.StdEncoding.EncodeToString(sum[:])
	pause := s.backoff
	for attempt := 1; ; attempt++ {
		in := &s3.PutObjectInput{
			Bucket:            aws.String(s.bucket),
			Key:               aws.String(key),
			Body:              bytes.NewReader(b.Data),
			ContentLength:     aws.Int64(int64(len(b.Data))),
			IfNoneMatch:       aws.String("*"),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
			ChecksumSHA256:    aws.String(checksum),
		}
		if b.ContentType != "" {
			in.ContentType = aws.String(b.ContentType)
		}
		_, err := s.client.PutObject(ctx, in)
		switch {
		case err == nil:
			return nil
		case hasStatus(err, http.StatusPreconditionFailed):
			// Create-once: the key holds its object already.
			return nil
		case hasStatus(err, http.StatusConflict):
			// Another put of the key is in flight; once it lands, ours
			// gets 412 above.
		default:
			return mapError(op, err)
		}
		if attempt == conflictAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		case <-time.After(pause):
		}
		pause *= 2
	}
	// Still conflicting: the object may have landed all the same.
	if _, err := s.Head(ctx, key); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return store.Unavailable(op, fmt.Errorf("concurrent creates still conflicting after %d attempts", conflictAttempts))
}

// Get returns the object at key or store.ErrNotFound.
func (s *Blobs) Get(ctx context.Context, key string) (store.Blob, error) {
	op := "get blob " + key
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		return store.Blob{}, mapError(op, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		// The answer broke off: the object is there, the read failed.
		return store.Blob{}, store.Unavailable(op, err)
	}
	return store.Blob{ContentType: aws.ToString(out.ContentType), Data: data}, nil
}

// Head returns what S3 tells of the object at key, or store.ErrNotFound.
func (s *Blobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		return store.BlobInfo{}, mapError("head blob "+key, err)
	}
	return store.BlobInfo{ContentType: aws.ToString(out.ContentType), Size: aws.ToInt64(out.ContentLength)}, nil
}

// MaxLinkTTL is the longest a presigned GET URL is made for. S3 checks
// only its signature and expiry, so a URL cannot be revoked: it serves the
// object until it expires, even after the chat it was made through stops
// naming the image (a deletion, an erasure), for as long as the object is
// stored. Links are kept short for that.
const MaxLinkTTL = 15 * time.Minute

// URL returns a presigned GET URL for key that works for ttl (at most
// MaxLinkTTL). The chat is not in the URL: S3 cannot check it when the
// URL is fetched. It does not check that the object exists; a URL to a
// missing key answers 404.
func (s *Blobs) URL(ctx context.Context, key string, _ store.LinkChat, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxLinkTTL {
		return "", fmt.Errorf("link to %s: ttl %s outside (0, %s]", key, ttl, MaxLinkTTL)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
	}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("link to %s: %w", key, err)
	}
	return req.URL, nil
}

// UploadTarget returns a presigned PUT of key that works for ttl. The
// signature covers the object's Content-Length, Content-Type and SHA-256
// checksum header, so S3 refuses a body of another size (the signature no
// longer matches) or with another checksum (BadDigest), and anything sent
// after ttl.
func (s *Blobs) UploadTarget(ctx context.Context, key string, u store.Upload, ttl time.Duration) (store.UploadTarget, error) {
	if ttl <= 0 {
		return store.UploadTarget{}, fmt.Errorf("upload to %s: ttl %s must be positive", key, ttl)
	}
	if u.Size <= 0 || u.ContentType == "" {
		return store.UploadTarget{}, fmt.Errorf("upload to %s: needs a size and a content type", key)
	}
	now := time.Now()
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(key),
		ContentLength:     aws.Int64(u.Size),
		ContentType:       aws.String(u.ContentType),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(base64.StdEncoding.EncodeToString(u.SHA256[:])),
	}, s3.WithPresignExpires(ttl))
	if err != nil {
		return store.UploadTarget{}, fmt.Errorf("upload to %s: %w", key, err)
	}
	header := make(map[string]string, len(req.SignedHeader))
	for k, v := range req.SignedHeader {
		// Host is the URL's; an HTTP client sets it from there.
		if !strings.EqualFold(k, "Host") && len(v) > 0 {
			header[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	return store.UploadTarget{Method: req.Method, URL: req.URL, Header: header, Expires: now.Add(ttl)}, nil
}

// List returns up to limit keys with the prefix after after, in order
// (S3 sorts keys by their UTF-8 bytes), a ListObjectsV2 call per 1,000.
func (s *Blobs) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	var keys []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	if after != "" {
		in.StartAfter = aws.String(after)
	}
	for len(keys) < limit {
		in.MaxKeys = aws.Int32(int32(min(limit-len(keys), 1000)))
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, mapError("list blobs "+prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken, in.StartAfter = out.NextContinuationToken, nil
	}
	return keys, nil
}

// Delete removes the object at key; a missing key is no error.
func (s *Blobs) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if err := mapError("delete blob "+key, err); !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

func hasStatus(err error, status int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == status
}

// mapError turns an S3 error into store's typed errors.
func mapError(op string, err error) error {
	var (
		noKey    *types.NoSuchKey
		notFound *types.NotFound
		api      smithy.APIError
	)
	switch {
	case errors.As(err, &noKey), errors.As(err, &notFound):
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	case errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket":
		// A missing bucket is a deployment fault, not a missing object.
		return fmt.Errorf("%s: %w", op, err)
	case hasStatus(err, http.StatusNotFound):
		// HEAD answers carry no error code.
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	case awsfault.Transient(err):
		return store.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
