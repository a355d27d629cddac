package embedded

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// uploadTarget makes a target for data and the handler that serves it,
// recording what it accepts.
func uploadTarget(t *testing.T, data []byte) (store.UploadTarget, http.Handler, *[]string) {
	t.Helper()
	l := NewLinker("http://local.test", []byte("secret"))
	target, err := l.UploadTarget(context.Background(), "uploads/t/0123456789abcdef",
		store.Upload{Size: int64(len(data)), SHA256: sha256.Sum256(data), ContentType: "image/png"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var accepted []string
	h := l.UploadHandler(func(_ context.Context, key string, got []byte) error {
		accepted = append(accepted, key)
		return nil
	})
	return target, h, &accepted
}

func put(h http.Handler, method, target string, body []byte) int {
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func TestUploadTargetRefusesTamperingAndWrongBodies(t *testing.T) {
	data := []byte("\x89PNG\r\n\x1a\nsome bytes")
	target, h, accepted := uploadTarget(t, data)
	u, _ := url.Parse(target.URL)
	retarget := func(k, v string) string {
		q := u.Query()
		q.Set(k, v)
		v2 := *u
		v2.RawQuery = q.Encode()
		return v2.String()
	}
	cases := []struct {
		name, method, url string
		body              []byte
		want              int
	}{
		{"OtherSize", http.MethodPut, retarget("size", "99"), data, http.StatusForbidden},
		{"OtherChecksum", http.MethodPut, retarget("sha256", strings.Repeat("0", 64)), data, http.StatusForbidden},
		{"OtherType", http.MethodPut, retarget("type", "image/gif"), data, http.StatusForbidden},
		{"OtherKey", http.MethodPut, strings.Replace(target.URL, "0123456789abcdef", "fedcba9876543210", 1), data, http.StatusForbidden},
		{"LongerExpiry", http.MethodPut, retarget("exp", "99999999999"), data, http.StatusForbidden},
		{"BodyOfAnotherSize", http.MethodPut, target.URL, append(bytes.Clone(data), 'x'), http.StatusBadRequest},
		{"BodyOfAnotherChecksum", http.MethodPut, target.URL, bytes.ToUpper(data), http.StatusBadRequest},
		{"NotAPut", http.MethodPost, target.URL, data, http.StatusMethodNotAllowed},
		{"TheBody", http.MethodPut, target.URL, data, http.StatusOK},
	}
	for _, c := range cases {
		if got := put(h, c.method, c.url, c.body); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if len(*accepted) != 1 || (*accepted)[0] != "uploads/t/0123456789abcdef" {
		t.Fatalf("accepted %v, want only the right body", *accepted)
	}
}
