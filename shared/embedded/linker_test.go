package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// through is the chat the tests' links are made through; namedThrough
// lets a link be served only through it.
var through = store.LinkChat{Tenant: "t", Chat: "c", Inc: "0123456789abcdef"}

func namedThrough(_ context.Context, chat store.LinkChat, _ string) (bool, error) {
	return chat == through, nil
}

// linkServer serves l's links from a fresh embedded store the way the local
// server routes them, and returns the store and the base URL.
func linkServer(t *testing.T, secret string) (*Linker, store.Blobs) {
	return linkServerAt(t, secret, time.Now)
}

// linkServerAt is linkServer with the linker reading the time from now.
func linkServerAt(t *testing.T, secret string, now func() time.Time) (*Linker, store.Blobs) {
	t.Helper()
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	l := NewLinker(srv.URL+"/", []byte(secret))
	l.now = now
	mux.Handle("GET "+LinkPath+"{key...}", l.Handler(db.Blobs(), namedThrough))
	return l, db.Blobs()
}

func fetch(t *testing.T, method, link string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %q is not {\"error\":{\"code\",\"message\"}}", body)
	}
	return e.Error.Code
}

func TestLinkServesBlobWithContentType(t *testing.T) {
	l, blobs := linkServer(t, "s3cret")
	// Keys with an escaped tenant ('%'), spaces and query characters.
	for _, key := range []string{"images/te%40nant/0123abcd", "text/a b/c?d#e&f=g", "plain"} {
		if err := blobs.Put(t.Context(), key, store.Blob{ContentType: "image/webp", Data: []byte("data of " + key)}); err != nil {
			t.Fatal(err)
		}
		link, err := l.URL(t.Context(), key, through, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := fetch(t, http.MethodGet, link)
		if resp.StatusCode != http.StatusOK || string(body) != "data of "+key {
			t.Fatalf("GET link to %q: %d %q", key, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "image/webp" {
			t.Errorf("Content-Type = %q, want image/webp", ct)
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.HasPrefix(cc, "private") {
			t.Errorf("Cache-Control = %q, want private", cc)
		}
		resp, body = fetch(t, http.MethodHead, link)
		if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != int64(len("data of "+key)) {
			t.Errorf("HEAD link: %d, %d body bytes, length %d", resp.StatusCode, len(body), resp.ContentLength)
		}
	}
}

func TestLinkURLShape(t *testing.T) {
	l := NewLinker("https://example.test/base/", []byte("k"))
	link, err := l.URL(t.Context(), "images/te%40nant/abc", through, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "example.test" || u.EscapedPath() != "/base/v1/links/images/te%2540nant/abc" {
		t.Fatalf("link %q: want host example.test and path /base/v1/links/images/te%%2540nant/abc", link)
	}
	exp, err := strconv.ParseInt(u.Query().Get("exp"), 10, 64)
	if err != nil || exp < time.Now().Add(time.Minute).Unix() {
		t.Fatalf("exp %q is not a Unix time at least a minute ahead", u.Query().Get("exp"))
	}
	if sig := u.Query().Get("sig"); len(sig) != 64 {
		t.Fatalf("sig %q is not hex HMAC-SHA256", sig)
	}
}

func TestLinkTamperedIsForbidden(t *testing.T) {
	l, blobs := linkServer(t, "s3cret")
	for _, key := range []string{"images/t/a", "images/t/b"} {
		if err := blobs.Put(t.Context(), key, store.Blob{ContentType: "image/png", Data: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	link, err := l.URL(t.Context(), "images/t/a", through, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	q := u.Query()
	other := NewLinker(strings.TrimSuffix(link[:strings.Index(link, LinkPath)], "/"), []byte("other secret"))
	forged, err := other.URL(t.Context(), "images/t/a", through, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(u *url.URL, q url.Values)) string {
		u2, q2 := *u, url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		edit(&u2, q2)
		u2.RawQuery = q2.Encode()
		return u2.String()
	}
	tests := []struct {
		name string
		link string
	}{
		{"OtherKey", strings.Replace(link, "/images/t/a?", "/images/t/b?", 1)},
		{"LaterExpiry", with(func(_ *url.URL, q url.Values) { q.Set("exp", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)) })},
		{"FlippedSignature", with(func(_ *url.URL, q url.Values) { s := q.Get("sig"); q.Set("sig", flipHex(s)) })},
		{"NoSignature", with(func(_ *url.URL, q url.Values) { q.Del("sig") })},
		{"NoExpiry", with(func(_ *url.URL, q url.Values) { q.Del("exp") })},
		{"ShortSignature", with(func(_ *url.URL, q url.Values) { q.Set("sig", q.Get("sig")[:32]) })},
		{"OtherSecret", forged},
		{"OtherTenant", with(func(_ *url.URL, q url.Values) { q.Set("t", "u") })},
		{"OtherChat", with(func(_ *url.URL, q url.Values) { q.Set("c", "d") })},
		{"OtherIncarnation", with(func(_ *url.URL, q url.Values) { q.Set("n", "fedcba9876543210") })},
		{"NoChat", with(func(_ *url.URL, q url.Values) { q.Del("c") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := fetch(t, http.MethodGet, tt.link)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s: status %d %q, want 403", tt.link, resp.StatusCode, body)
			}
			if code := errorCode(t, body); code != "forbidden" {
				t.Fatalf("error code %q, want forbidden", code)
			}
		})
	}
}

func flipHex(s string) string {
	b := []byte(s)
	if b[0] == '0' {
		b[0] = '1'
	} else {
		b[0] = '0'
	}
	return string(b)
}

func TestLinkExpiredIsGone(t *testing.T) {
	start := time.Now()
	var elapsed atomic.Int64 // the fake clock's offset from start
	l, blobs := linkServerAt(t, "s3cret", func() time.Time { return start.Add(time.Duration(elapsed.Load())) })
	if err := blobs.Put(t.Context(), "images/t/a", store.Blob{ContentType: "image/png", Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	link, err := l.URL(t.Context(), "images/t/a", through, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	elapsed.Store(int64(time.Minute))
	if resp, _ := fetch(t, http.MethodGet, link); resp.StatusCode != http.StatusOK {
		t.Fatalf("at its ttl the link gave %d, want 200", resp.StatusCode)
	}
	elapsed.Store(int64(time.Minute + 2*time.Second))
	resp, body := fetch(t, http.MethodGet, link)
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("expired link: status %d %q, want 410", resp.StatusCode, body)
	}
	if code := errorCode(t, body); code != "expired" {
		t.Fatalf("error code %q, want expired", code)
	}
}

func TestLinkToMissingBlobIsNotFound(t *testing.T) {
	l, _ := linkServer(t, "s3cret")
	link, err := l.URL(t.Context(), "images/t/never", through, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, http.MethodGet, link)
	if resp.StatusCode != http.StatusNotFound || errorCode(t, body) != "not_found" {
		t.Fatalf("status %d %q, want 404 not_found", resp.StatusCode, body)
	}
}

// TestLinkServesOnlyWhileItsChatNamesTheImage: a valid link is checked
// again when fetched, and is 404, as for a blob not stored, once the chat
// it was made through names the image no more, or when it was made through
// no chat; a check that fails is the store's outage.
func TestLinkServesOnlyWhileItsChatNamesTheImage(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Blobs().Put(t.Context(), "images/t/a", store.Blob{ContentType: "image/png", Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	l := NewLinker("http://h", []byte("k"))
	var named atomic.Bool
	var outage atomic.Bool
	h := l.Handler(db.Blobs(), func(_ context.Context, chat store.LinkChat, key string) (bool, error) {
		if outage.Load() {
			return false, store.Unavailable("check", errors.New("down"))
		}
		return named.Load() && chat == through && key == "images/t/a", nil
	})
	tests := []struct {
		name        string
		chat        store.LinkChat
		named, down bool
		want        int
	}{
		{"ChatNamesIt", through, true, false, http.StatusOK},
		{"ChatNamesItNoMore", through, false, false, http.StatusNotFound},
		{"NoChat", store.LinkChat{}, true, false, http.StatusNotFound},
		{"CheckUnavailable", through, true, true, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			named.Store(tt.named)
			outage.Store(tt.down)
			link, err := l.URL(t.Context(), "images/t/a", tt.chat, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, link, nil))
			if rec.Code != tt.want {
				t.Fatalf("status %d %q, want %d", rec.Code, rec.Body, tt.want)
			}
			if tt.want == http.StatusOK && rec.Header().Get("Cache-Control") != "private, no-cache" {
				t.Errorf("Cache-Control %q, want private, no-cache", rec.Header().Get("Cache-Control"))
			}
		})
	}
}

func TestLinkerRefusesWhatItCannotSign(t *testing.T) {
	ok := NewLinker("http://h", []byte("k"))
	tests := []struct {
		name string
		l    *Linker
		key  string
		ttl  time.Duration
	}{
		{"NoSecret", NewLinker("http://h", nil), "a/b", time.Minute},
		{"ZeroTTL", ok, "a/b", 0},
		{"TTLOverSevenDays", ok, "a/b", MaxLinkTTL + time.Second},
		{"EmptyKey", ok, "", time.Minute},
		{"EmptySegment", ok, "a//b", time.Minute},
		{"DotSegment", ok, "a/../b", time.Minute},
		{"LeadingSlash", ok, "/a", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if u, err := tt.l.URL(t.Context(), tt.key, through, tt.ttl); err == nil {
				t.Fatalf("URL(%q, %s) = %q, want an error", tt.key, tt.ttl, u)
			}
		})
	}
	h := NewLinker("http://h", nil).Handler(nil, namedThrough)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/links/a?exp=1&sig=00", nil))
	if rec.Code != http.StatusForbidden {
		t.Fatalf("handler without a secret answered %d, want 403", rec.Code)
	}
}

// FuzzLinkRoundTrip: every key the linker signs comes back out of its URL
// exactly, so escaping never changes which blob a link names.
func FuzzLinkRoundTrip(f *testing.F) {
	for _, s := range []string{"images/te%40nant/abc", "a b/c?d#e", "x/%2F/y", "ü/漢字", "a+b/c;d"} {
		f.Add(s)
	}
	l := NewLinker("http://h/p", []byte("k"))
	f.Fuzz(func(t *testing.T, key string) {
		link, err := l.URL(t.Context(), key, through, time.Minute)
		if err != nil {
			return
		}
		req, err := http.NewRequest(http.MethodGet, link, nil)
		if err != nil {
			t.Fatalf("link %q does not parse: %v", link, err)
		}
		got, _, err := l.verify(req.URL)
		if err != nil {
			t.Fatalf("link %q for %q refused: %v", link, key, err)
		}
		if got != key {
			t.Fatalf("link %q names %q, want %q", link, got, key)
		}
	})
}
