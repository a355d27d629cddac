package embedded

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/store"
)

// LinkPath is the path under the base URL that links point to; the server
// routes GET LinkPath+"{key...}" to Handler.
const LinkPath = "/v1/links/"

// MaxLinkTTL is the longest a link may live, as for an S3 presigned URL.
const MaxLinkTTL = 7 * 24 * time.Hour

// Linker makes and checks signed, expiring links to blobs: the embedded
// stand-in for S3 presigned URLs. A link is
//
//	base + LinkPath + escaped key + "?t=" tenant "&c=" chat "&n=" incarnation
//	+ "&exp=" + unix seconds + "&sig=" + hex HMAC-SHA256
//
// The signature covers the decoded key, the chat it was made through
// (store.LinkChat) and the expiry, not the URL text, so a link stays valid
// however a client or proxy re-escapes it, and no re-escaping can make it
// name another key or chat. Unlike an S3 presigned URL it is checked again
// when fetched: Handler serves it only while its chat names the image.
type Linker struct {
	base   string
	secret []byte
	now    func() time.Time
	// uploads holds the bytes of the upload bodies being checked.
	uploads *semaphore.Weighted
}

var _ store.Linker = (*Linker)(nil)

// NewLinker makes links under baseURL (scheme and host, optionally a path,
// without a trailing slash) signed with secret. With an empty secret URL
// fails and Handler refuses every link.
func NewLinker(baseURL string, secret []byte) *Linker {
	return &Linker{base: strings.TrimRight(baseURL, "/"), secret: bytes.Clone(secret), now: time.Now, uploads: semaphore.NewWeighted(UploadsHeld)}
}

// URL returns a link to key through chat that works for ttl (at most
// MaxLinkTTL) while the chat names the image (Handler).
func (l *Linker) URL(ctx context.Context, key string, chat store.LinkChat, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(l.secret) == 0 {
		return "", errors.New("embedded: linker has no secret")
	}
	if ttl <= 0 || ttl > MaxLinkTTL {
		return "", fmt.Errorf("embedded: link ttl %s outside (0, %s]", ttl, MaxLinkTTL)
	}
	if err := checkLinkKey(key); err != nil {
		return "", fmt.Errorf("link: %w", err)
	}
	exp := l.now().Add(ttl + time.Second - 1).Unix() // round up: never shorter than ttl
	q := url.Values{"t": {chat.Tenant}, "c": {chat.Chat}, "n": {chat.Inc}}
	return l.base + LinkPath + escapeKey(key) + "?" + q.Encode() +
		"&exp=" + strconv.FormatInt(exp, 10) + "&sig=" + hex.EncodeToString(l.sign(key, chat, exp)), nil
}

// sign is HMAC-SHA256 over "v2\n" exp "\n", the chat's tenant, id and
// incarnation each as its length, ":" and itself, then the key. exp and the
// lengths are digits only, so each field ends where it says and the rest
// is exactly the key.
func (l *Linker) sign(key string, chat store.LinkChat, exp int64) []byte {
	mac := hmac.New(sha256.New, l.secret)
	mac.Write([]byte("v2\n"))
	mac.Write([]byte(strconv.FormatInt(exp, 10)))
	mac.Write([]byte("\n"))
	for _, f := range []string{chat.Tenant, chat.Chat, chat.Inc} {
		mac.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	mac.Write([]byte(key))
	return mac.Sum(nil)
}

// LinkCheck tells whether a link to key made through chat may still be
// served: whether that incarnation still names the image.
type LinkCheck func(ctx context.Context, chat store.LinkChat, key string) (bool, error)

// Handler serves links made by l from blobs. A missing, malformed or
// tampered link is 403, an expired one 410, both with a JSON error; a valid
// link whose chat no longer names the image (check) is 404, as for a blob
// not stored; else it serves the blob with its content type. No cache may
// keep it (the chat may stop naming it). GET and HEAD only.
func (l *Linker) Handler(blobs store.Blobs, check LinkCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, r, &fault.Error{Code: fault.MethodNotAllowed, Message: "links answer GET and HEAD only"})
			return
		}
		key, chat, err := l.verify(r.URL)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		named, err := check(r.Context(), chat, key)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		if !named {
			api.WriteError(w, r, api.NotFound("the linked object does not exist"))
			return
		}
		b, err := blobs.Get(r.Context(), key)
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, r, api.NotFound("the linked object does not exist"))
			return
		}
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		ct := b.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("Cache-Control", "private, no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b.Data))
	})
}

// verify returns the key and chat a link names, or the API error that
// refuses it. The signature is checked before the expiry, so a forged
// expiry reads as forged, not as expired.
func (l *Linker) verify(u *url.URL) (key string, chat store.LinkChat, err error) {
	forbidden := func(msg string) error {
		return &fault.Error{Code: fault.Forbidden, Message: msg}
	}
	if len(l.secret) == 0 {
		return "", chat, forbidden("links are not enabled")
	}
	_, escaped, ok := strings.Cut(u.EscapedPath(), LinkPath)
	if !ok || escaped == "" {
		return "", chat, forbidden("not a link path")
	}
	key, err = url.PathUnescape(escaped)
	if err != nil {
		return "", chat, forbidden("link path is not validly escaped")
	}
	q := u.Query()
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return "", chat, forbidden("link has no valid exp")
	}
	sig, err := hex.DecodeString(q.Get("sig"))
	if err != nil || len(sig) != sha256.Size {
		return "", chat, forbidden("link has no valid sig")
	}
	chat = store.LinkChat{Tenant: q.Get("t"), Chat: q.Get("c"), Inc: q.Get("n")}
	if !hmac.Equal(sig, l.sign(key, chat, exp)) {
		return "", store.LinkChat{}, forbidden("link signature does not match")
	}
	if l.now().Unix() > exp {
		return "", store.LinkChat{}, &fault.Error{Code: fault.Expired, Message: "link expired at " + time.Unix(exp, 0).UTC().Format(time.RFC3339)}
	}
	return key, chat, nil
}

// checkLinkKey refuses keys a URL path cannot carry faithfully: empty
// segments and dot segments would be cleaned away by HTTP routers.
func checkLinkKey(key string) error {
	if err := checkBlobKey(key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: blob key %q has an empty or dot path segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// escapeKey escapes each '/'-separated segment, keeping the slashes, so
// '%', '?', '#' and spaces in a key survive the trip through a URL.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
