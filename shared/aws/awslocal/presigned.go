package awslocal

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// maxPresignedPut bounds what PresignedPuts reads of one upload.
const maxPresignedPut = 64 << 20

// PresignedPuts is an http.Handler in front of a local S3 server that
// checks presigned PUTs as S3 does, where the local server checks nothing:
//   - past X-Amz-Date + X-Amz-Expires: 403 AccessDenied;
//   - a signature that the request's signed headers (size, type, checksum)
//     no longer match: 403 SignatureDoesNotMatch;
//   - a body whose SHA-256 is not its x-amz-checksum-sha256: 400 BadDigest.
//
// Every other request passes through untouched.
type PresignedPuts struct {
	next   http.Handler
	creds  aws.Credentials
	region string
	now    func() time.Time
}

// NewPresignedPuts wraps next, checking signatures made with creds in region.
func NewPresignedPuts(next http.Handler, creds aws.Credentials, region string) *PresignedPuts {
	return &PresignedPuts{next: next, creds: creds, region: region, now: time.Now}
}

func (p *PresignedPuts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method != http.MethodPut || q.Get("X-Amz-Signature") == "" {
		p.next.ServeHTTP(w, r)
		return
	}
	refuse := func(a Answer) {
		w.Header().Set("Content-Type", a.ContentType)
		w.WriteHeader(a.Status)
		w.Write(a.Body)
	}
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	expires, err2 := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || err2 != nil {
		refuse(S3Error(http.StatusForbidden, "AuthorizationQueryParametersError", "X-Amz-Date or X-Amz-Expires is malformed"))
		return
	}
	if p.now().After(signed.Add(time.Duration(expires) * time.Second)) {
		refuse(S3Error(http.StatusForbidden, "AccessDenied", "Request has expired"))
		return
	}
	if !p.signatureMatches(r, q, signed) {
		refuse(S3Error(http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPresignedPut+1))
	if err != nil || len(body) > maxPresignedPut {
		refuse(S3Error(http.StatusBadRequest, "IncompleteBody", "the body could not be read"))
		return
	}
	if want := r.Header.Get("X-Amz-Checksum-Sha256"); want != "" {
		sum := sha256.Sum256(body)
		if base64.StdEncoding.EncodeToString(sum[:]) != want {
			refuse(S3Error(http.StatusBadRequest, "BadDigest", "The SHA256 you specified did not match the calculated checksum."))
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.next.ServeHTTP(w, r)
}

// signatureMatches signs the request again, with the headers it says it
// signed as it carries them now, and compares.
func (p *PresignedPuts) signatureMatches(r *http.Request, q url.Values, signed time.Time) bool {
	got := q.Get("X-Amz-Signature")
	names := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	for _, k := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
		q.Del(k)
	}
	u := *r.URL
	u.Scheme, u.Host, u.RawQuery = "http", r.Host, q.Encode()
	again, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return false
	}
	for _, name := range names {
		switch name {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			for _, v := range r.Header.Values(name) {
				again.Header.Add(name, v)
			}
		}
	}
	signedURL, _, err := v4.NewSigner().PresignHTTP(r.Context(), p.creds, again, "UNSIGNED-PAYLOAD", "s3", p.region, signed)
	if err != nil {
		return false
	}
	su, err := url.Parse(signedURL)
	return err == nil && su.Query().Get("X-Amz-Signature") == got
}
