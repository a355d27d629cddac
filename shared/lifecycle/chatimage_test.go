package lifecycle_test

import (
	"encoding/json"
	"image/color"
	"net/http"
	"testing"

	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
)

// TestAnImageIsServedOnlyThroughAChatThatNamesIt: GET
// /v1/chats/{chat}/images/{name} answers the image through a chat that
// names it, and 404 (as for an image not stored, telling nothing of the
// other chats) through one that never did, a deleted one, or the id's new
// chat after a deletion; an image another chat still names stays
// readable through that chat alone. Its Cache-Control lets no cache keep
// it past a deletion.
func TestAnImageIsServedOnlyThroughAChatThatNamesIt(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shot := pngB64(t, color.RGBA{201, 202, 203, 255})
			name := images.Name(shot)
			e.append("alice", "a", withImage("the passport", shot))
			e.append("alice", "b", withImage("the same photo", shot))
			e.append("alice", "c", user("names no image"))
			get := func(tenant, chat string) (int, http.Header) {
				t.Helper()
				req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/v1/chats/"+chat+"/images/"+name, nil)
				req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode, res.Header
			}
			type want struct {
				tenant, chat string
				code         int
			}
			check := func(when string, cases []want) {
				t.Helper()
				for _, c := range cases {
					code, h := get(c.tenant, c.chat)
					if code != c.code {
						t.Errorf("%s: GET through %s's chat %s: %d, want %d", when, c.tenant, c.chat, code, c.code)
					}
					if code == 200 && h.Get("Cache-Control") != "private, no-cache" {
						t.Errorf("%s: Cache-Control %q", when, h.Get("Cache-Control"))
					}
				}
			}
			check("both chats name it", []want{
				{"alice", "a", 200}, {"alice", "b", 200},
				{"alice", "c", 404},      // a chat that never named it
				{"alice", "nochat", 404}, // an id with no chat
				{"bob", "a", 404},        // another tenant's chat of the same id
			})
			if code, _ := e.delete("alice", "a"); code != 200 {
				t.Fatalf("delete a: %d", code)
			}
			check("a deleted", []want{{"alice", "a", 404}, {"alice", "b", 200}, {"alice", "c", 404}})
			e.append("alice", "a", user("a new chat under the old id"))
			check("a's id reused", []want{{"alice", "a", 404}, {"alice", "b", 200}})
		})
	}
}

// TestASignedLinkIsServedOnlyWhileItsChatNamesTheImage: a read-back's
// signed image link is made through the chat read back. The local server
// checks it when fetched: once that chat is deleted, or its id names a new
// chat, the link is 404, while a link through another chat that names the
// image still serves it. An S3 presigned URL cannot be revoked: it serves
// the image until it expires (lifecycle.LinkTTL, at most
// s3blobs.MaxLinkTTL), for as long as the image is stored.
func TestASignedLinkIsServedOnlyWhileItsChatNamesTheImage(t *testing.T) {
	t.Parallel()
	if lifecycle.LinkTTL > s3blobs.MaxLinkTTL {
		t.Fatalf("read-back links live %s, longer than a presigned URL may (%s)", lifecycle.LinkTTL, s3blobs.MaxLinkTTL)
	}
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shot := pngB64(t, color.RGBA{211, 212, 213, 255})
			e.append("alice", "a", withImage("the passport", shot))
			e.append("alice", "b", withImage("the same photo", shot))
			link := func(chat string) string {
				t.Helper()
				var m struct{ Content []struct{ URL string } }
				p := e.messages("alice", chat, "?limit=1&images=links")
				if len(p.Messages) != 1 {
					t.Fatalf("read-back of %s: %+v", chat, p)
				}
				if err := json.Unmarshal(p.Messages[0].Message, &m); err != nil || len(m.Content) != 2 || m.Content[1].URL == "" {
					t.Fatalf("read-back of %s: %s, want a ref with a url", chat, p.Messages[0].Message)
				}
				return m.Content[1].URL
			}
			fetch := func(url string) int {
				t.Helper()
				res, err := http.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			throughA, throughB := link("a"), link("b")
			// A link whose chat was deleted: 404 where links are checked;
			// a presigned URL serves until it expires.
			revoked := http.StatusNotFound
			if b.Name != "embedded" {
				revoked = http.StatusOK
			}
			type want struct {
				link string
				code int
			}
			check := func(when string, cases map[string]want) {
				t.Helper()
				for name, c := range cases {
					if code := fetch(c.link); code != c.code {
						t.Errorf("%s: the link through %s: %d, want %d", when, name, code, c.code)
					}
				}
			}
			check("both chats name it", map[string]want{"a": {throughA, 200}, "b": {throughB, 200}})
			if code, _ := e.delete("alice", "a"); code != 200 {
				t.Fatalf("delete a: %d", code)
			}
			check("a deleted", map[string]want{"a": {throughA, revoked}, "b": {throughB, 200}})
			e.append("alice", "a", user("a new chat under the old id"))
			check("a's id reused", map[string]want{"a": {throughA, revoked}, "b": {throughB, 200}})
		})
	}
}
