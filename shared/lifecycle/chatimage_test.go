package lifecycle_test

import (
	"image/color"
	"net/http"
	"testing"

	"github.com/durachat/durachat/shared/images"
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
