package lambdafn_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/config"
)

// dotSegment reports whether a URL's path has a segment a client resolves
// away (RFC 3986 5.2.4), escaped or not.
func dotSegment(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		switch strings.ToLower(seg) {
		case ".", "..", "%2e", "%2e%2e", ".%2e", "%2e.":
			return true
		}
	}
	return false
}

func TestATenantFromAJWTClaimKeepsEveryLinkWellFormedOrIsRefused(t *testing.T) {
	fns := functionsAuth(t, lambdafn.Auth(config.Config{TenantClaim: "sub"}, nil))
	img := noisyPNG(t, 3, 8, 8)
	imgBytes, _ := base64.StdEncoding.DecodeString(img)
	appendBody := mustJSON(t, obj{"messages": list{obj{"role": "user", "content": list{obj{"type": "image", "mimeType": "image/png", "data": img}}}}})
	uploadBody := mustJSON(t, obj{"name": "0123456789abcdef", "size": 100, "type": "image/png", "sha256": strings.Repeat("0", 64)})

	for _, tenant := range []string{".", ".."} {
		t.Run(tenant, func(t *testing.T) {
			claims := map[string]string{"sub": tenant}
			for _, c := range []struct{ fn, path string }{{"memory", "/v1/chats/c/messages"}, {"offload", "/v1/chats/c/uploads"}} {
				resp := fns[c.fn].doAs(t, claims, "POST", c.path, "", appendBody)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("%s: %d %s, want 401", c.path, resp.StatusCode, resp.Body)
				}
			}
		})
	}
	for _, tenant := range []string{"a/b", "auth0|5f7c x", "%2e%2e", ".hidden", "...", "ü"} {
		t.Run(tenant, func(t *testing.T) {
			claims := map[string]string{"sub": tenant}
			if resp := fns["memory"].doAs(t, claims, "POST", "/v1/chats/c/messages", "", appendBody); resp.StatusCode != http.StatusOK {
				t.Fatalf("append: %d %s", resp.StatusCode, resp.Body)
			}
			resp := fns["memory"].doAs(t, claims, "GET", "/v1/chats/c/messages", "images=links", nil)
			var page struct {
				Messages []struct {
					Message struct{ Content []struct{ URL string } }
				}
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &page) != nil || len(page.Messages) != 1 || len(page.Messages[0].Message.Content) != 1 {
				t.Fatalf("read back: %d %s", resp.StatusCode, resp.Body)
			}
			link := page.Messages[0].Message.Content[0].URL
			if link == "" || dotSegment(link) {
				t.Fatalf("link %q: want one with no dot segment", link)
			}
			res, err := http.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(got) != string(imgBytes) {
				t.Fatalf("GET %s: %d, %d bytes; want the image", link, res.StatusCode, len(got))
			}
			resp = fns["offload"].doAs(t, claims, "POST", "/v1/chats/c/uploads", "", uploadBody)
			var up struct{ Upload struct{ URL string } }
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &up) != nil || up.Upload.URL == "" || dotSegment(up.Upload.URL) {
				t.Fatalf("upload target: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}
