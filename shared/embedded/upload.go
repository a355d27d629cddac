package embedded

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
)

// UploadPath is the path under the base URL that upload targets point to;
// the server routes PUT UploadPath+"{key...}" to UploadHandler.
const UploadPath = "/v1/uploads/"

var _ store.Uploader = (*Linker)(nil)

// Upload bodies are held whole while they are checked, so the bytes of the
// bodies held at once are bounded: UploadsHeld in all, each waiting at most
// UploadWait for its room (then a 503 with Retry-After). 64 MiB is four
// uploads of the largest size, and leaves the process's decode budget and
// the rest of its memory what they had (docs/performance.md).
const (
	UploadsHeld = 64 << 20
	UploadWait  = 10 * time.Second
)

// UploadTarget returns a signed PUT link to key, the local stand-in for an
// S3 presigned PUT: the signature covers the key, the expiry, the size, the
// checksum and the content type, and UploadHandler refuses a body of
// another size or checksum. ttl is at most MaxLinkTTL.
func (l *Linker) UploadTarget(ctx context.Context, key string, u store.Upload, ttl time.Duration) (store.UploadTarget, error) {
	if err := ctx.Err(); err != nil {
		return store.UploadTarget{}, err
	}
	if len(l.secret) == 0 {
		return store.UploadTarget{}, errors.New("embedded: linker has no secret")
	}
	if ttl <= 0 || ttl > MaxLinkTTL {
		return store.UploadTarget{}, fmt.Errorf("embedded: upload ttl %s outside (0, %s]", ttl, MaxLinkTTL)
	}
	if err := checkLinkKey(key); err != nil {
		return store.UploadTarget{}, fmt.Errorf("upload: %w", err)
	}
	if u.Size <= 0 || u.ContentType == "" {
		return store.UploadTarget{}, fmt.Errorf("upload to %s: needs a size and a content type", key)
	}
	expires := l.now().Add(ttl + time.Second - 1).Truncate(time.Second)
	sum := hex.EncodeToString(u.SHA256[:])
	q := url.Values{}
	q.Set("exp", strconv.FormatInt(expires.Unix(), 10))
	q.Set("size", strconv.FormatInt(u.Size, 10))
	q.Set("sha256", sum)
	q.Set("type", u.ContentType)
	q.Set("sig", hex.EncodeToString(l.signUpload(key, expires.Unix(), u.Size, sum, u.ContentType)))
	return store.UploadTarget{
		Method:  http.MethodPut,
		URL:     l.base + UploadPath + escapeKey(key) + "?" + q.Encode(),
		Header:  map[string]string{"Content-Type": u.ContentType, "Content-Length": strconv.FormatInt(u.Size, 10)},
		Expires: expires,
	}, nil
}

// signUpload is HMAC-SHA256 over "put\n" exp "\n" size "\n" sha256 "\n"
// type "\n" key: every field before the key is free of newlines (digits,
// hex, and a content type checked to have none).
func (l *Linker) signUpload(key string, exp, size int64, sum, contentType string) []byte {
	mac := hmac.New(sha256.New, l.secret)
	fmt.Fprintf(mac, "put\n%d\n%d\n%s\n%s\n%s", exp, size, sum, contentType, key)
	return mac.Sum(nil)
}

// UploadHandler serves the upload targets l makes. A tampered target is
// 403, an expired one 410; a body that is not the size the target was made
// for, or whose SHA-256 differs, is 400 and is never handed on. A body that
// matches goes to accept, whose error (a *fault.Error for bad bytes) is the
// answer; success is 200 {"key"}. Its bodies are limited to
// images.MaxUploadBytes (api.BodyLimit), not the server's JSON limit, and
// are read only once UploadsHeld has room for them.
func (l *Linker) UploadHandler(accept func(ctx context.Context, key string, data []byte) error) http.Handler {
	return api.BodyLimit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			w.Header().Set("Allow", "PUT")
			api.WriteError(w, r, &fault.Error{Code: fault.MethodNotAllowed, Message: "upload targets answer PUT only"})
			return
		}
		key, size, sum, err := l.verifyUpload(r.URL)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		if r.ContentLength >= 0 && r.ContentLength != size {
			api.WriteError(w, r, api.BadRequest("Content-Length", "size mismatch: the body is %d bytes, the upload is for %d", r.ContentLength, size))
			return
		}
		release, err := l.holdUpload(r.Context(), size)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		defer release()
		data, err := readUpload(r.Body, size)
		if err != nil {
			api.WriteError(w, r, api.BadRequest("", "reading the body: %v", err))
			return
		}
		if int64(len(data)) != size {
			api.WriteError(w, r, api.BadRequest("Content-Length", "size mismatch: the body is not the %d bytes the upload is for", size))
			return
		}
		if got := sha256.Sum256(data); !hmac.Equal(got[:], sum) {
			api.WriteError(w, r, api.BadRequest("sha256", "checksum mismatch: the body's SHA-256 is %x, the upload is for %x", got, sum))
			return
		}
		if err := accept(r.Context(), key, data); err != nil {
			api.WriteError(w, r, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]string{"key": key})
	}), images.MaxUploadBytes)
}

// holdUpload takes room for an upload body of size bytes in UploadsHeld,
// waiting at most UploadWait; the returned func gives it back.
func (l *Linker) holdUpload(ctx context.Context, size int64) (release func(), err error) {
	if size > images.MaxUploadBytes {
		return nil, &fault.Error{Code: fault.TooLarge, Message: fmt.Sprintf("an upload is at most %d bytes", images.MaxUploadBytes)}
	}
	wctx, cancel := context.WithTimeout(ctx, UploadWait)
	defer cancel()
	if err := l.uploads.Acquire(wctx, size); err != nil {
		return nil, api.Unavailable(fmt.Errorf("embedded: %d bytes of uploads held for %s: %w", UploadsHeld, UploadWait, err))
	}
	return func() { l.uploads.Release(size) }, nil
}

// readUpload reads a body of the size it was signed for into one buffer of
// that size and one byte more, to tell a body too long.
func readUpload(body io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size+1)
	n, err := io.ReadFull(body, data)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return data[:n], nil
}

// verifyUpload returns what an upload target names, or the API error that
// refuses it; the signature is checked before the expiry.
func (l *Linker) verifyUpload(u *url.URL) (key string, size int64, sum []byte, err error) {
	forbidden := func(msg string) error {
		return &fault.Error{Code: fault.Forbidden, Message: msg}
	}
	if len(l.secret) == 0 {
		return "", 0, nil, forbidden("uploads are not enabled")
	}
	_, escaped, ok := strings.Cut(u.EscapedPath(), UploadPath)
	if !ok || escaped == "" {
		return "", 0, nil, forbidden("not an upload path")
	}
	key, err = url.PathUnescape(escaped)
	if err != nil {
		return "", 0, nil, forbidden("upload path is not validly escaped")
	}
	q := u.Query()
	exp, err1 := strconv.ParseInt(q.Get("exp"), 10, 64)
	size, err2 := strconv.ParseInt(q.Get("size"), 10, 64)
	sum, err3 := hex.DecodeString(q.Get("sha256"))
	sig, err4 := hex.DecodeString(q.Get("sig"))
	contentType := q.Get("type")
	if err := errors.Join(err1, err2, err3, err4); err != nil || len(sum) != sha256.Size || len(sig) != sha256.Size || strings.ContainsAny(contentType, "\n\r") {
		return "", 0, nil, forbidden("upload target is malformed")
	}
	if !hmac.Equal(sig, l.signUpload(key, exp, size, hex.EncodeToString(sum), contentType)) {
		return "", 0, nil, forbidden("upload signature does not match")
	}
	if l.now().Unix() > exp {
		return "", 0, nil, &fault.Error{Code: fault.Expired, Message: "upload target expired at " + time.Unix(exp, 0).UTC().Format(time.RFC3339)}
	}
	return key, size, sum, nil
}
