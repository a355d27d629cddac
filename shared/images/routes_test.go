package images_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// The routes that take inline images all store them through one
// images.Incoming. These tests hold every such route to its rules.

const (
	routeTenant = "acme"
	routeChat   = "c1"
)

// routesEnv serves every route that takes inline images, and before-request,
// over one image store.
type routesEnv struct {
	blobs *storefake.Blobs
	table store.Table
	log   *transcript.Log
	srv   *httptest.Server
}

func newRoutesEnv(t *testing.T) *routesEnv {
	t.Helper()
	b := testenv.Embedded(t)
	blobs := storefake.NewBlobs()
	imgs := images.New(blobs)
	log := transcript.New(transcript.Config{Table: b.Table, Blobs: b.Blobs, Images: imgs})
	mux := http.NewServeMux()
	hooks.NewOffload(imgs, lifecycle.New(lifecycle.Config{Table: b.Table, Blobs: blobs})).Register(mux)
	hooks.NewRestore(imgs, nil).Register(mux)
	transcript.NewRoutes(log, imgs, nil).Register(mux)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(api.WithTenant(r.Context(), routeTenant)))
	}))
	t.Cleanup(srv.Close)
	return &routesEnv{blobs: blobs, table: b.Table, log: log, srv: srv}
}

func (e *routesEnv) post(t *testing.T, route string, body any) (int, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.srv.Client().Post(e.srv.URL+"/v1/chats/"+routeChat+"/"+route, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}

// imageKeys counts the images stored: the image store is all they share.
func (e *routesEnv) imageKeys() int { return e.blobs.Len() }

type block = map[string]any

func imageBlock(b64 string) block {
	return block{"type": "image", "data": b64, "mimeType": "image/png"}
}

// inlineRoute is a route that takes inline images: how to send content
// blocks through it, and the field path of its blocks.
type inlineRoute struct {
	name  string
	field string // the path of the content blocks in its body
	// send posts blocks; on 200 it returns the image names the stored
	// content carries, in order.
	send func(t *testing.T, e *routesEnv, blocks []block) (status int, body []byte, names []string)
}

var inlineRoutes = []inlineRoute{
	{"after-tool", "result.content", func(t *testing.T, e *routesEnv, blocks []block) (int, []byte, []string) {
		status, out := e.post(t, "hooks/after-tool", map[string]any{
			"call":   map[string]any{"id": "t1", "name": "shot", "nested": false},
			"result": map[string]any{"content": blocks, "isError": false},
		})
		var a struct{ Result struct{ Content []block } }
		return status, out, refsIn(t, status, out, &a, func() []block { return a.Result.Content })
	}},
	{"offload-input", "message.content", func(t *testing.T, e *routesEnv, blocks []block) (int, []byte, []string) {
		status, out := e.post(t, "hooks/offload-input", map[string]any{
			"message": map[string]any{"role": "user", "content": blocks},
		})
		var a struct{ Message struct{ Content []block } }
		return status, out, refsIn(t, status, out, &a, func() []block { return a.Message.Content })
	}},
	{"messages", "messages[0].content", func(t *testing.T, e *routesEnv, blocks []block) (int, []byte, []string) {
		status, out := e.post(t, "messages", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": blocks}},
		})
		if status != http.StatusOK {
			return status, out, nil
		}
		c, _, err := chatid.New(e.table).Current(t.Context(), routeTenant, routeChat)
		if err != nil {
			t.Fatal(err)
		}
		n, err := e.log.Len(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := e.log.Entries(t.Context(), c, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, en := range entries {
			for _, line := range strings.Split(en.Text, "\n") {
				if n := refs.RefName(line); n != "" {
					names = append(names, n)
				}
			}
		}
		return status, out, names
	}},
}

// refsIn decodes a hook's answer into a and returns the names of the ref
// blocks of its content.
func refsIn(t *testing.T, status int, out []byte, a any, content func() []block) []string {
	t.Helper()
	if status != http.StatusOK {
		return nil
	}
	if err := json.Unmarshal(out, a); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	var names []string
	for _, b := range content() {
		if text, _ := b["text"].(string); refs.RefName(text) != "" {
			names = append(names, refs.RefName(text))
		}
	}
	return names
}

// restored stores b64 with after-tool and returns the image block
// before-request puts in the place of its ref, with its name.
func restored(t *testing.T, e *routesEnv, b64 string) (block, string) {
	t.Helper()
	_, _, names := inlineRoutes[0].send(t, e, []block{imageBlock(b64)})
	if len(names) != 1 {
		t.Fatalf("after-tool stored %v", names)
	}
	status, out := e.post(t, "hooks/before-request", map[string]any{
		"format": "pi",
		"request": map[string]any{"messages": []any{map[string]any{
			"role": "user", "content": []any{block{"type": "text", "text": refs.Ref(names[0])}},
		}}},
	})
	var a struct {
		Request struct{ Messages []struct{ Content []block } }
	}
	if status != http.StatusOK || json.Unmarshal(out, &a) != nil || a.Request.Messages[0].Content[0]["type"] != "image" {
		t.Fatalf("before-request: %d %s", status, out)
	}
	return a.Request.Messages[0].Content[0], names[0]
}

func TestSameNameWhicheverRoute(t *testing.T) {
	small := b64(pngBytes(t, gradient(16, 16)))
	wide := b64(pngBytes(t, gradient(2100, 8))) // over 2048 px: stored shrunk
	tests := []struct {
		name string
		// request returns the blocks to send and the names their refs
		// must carry.
		request func(t *testing.T, e *routesEnv) ([]block, []string)
	}{
		{"an image as pasted", func(*testing.T, *routesEnv) ([]block, []string) {
			return []block{imageBlock(small)}, []string{images.Name(small)}
		}},
		{"an image shown twice", func(*testing.T, *routesEnv) ([]block, []string) {
			n := images.Name(small)
			return []block{imageBlock(small), {"type": "text", "text": "again"}, imageBlock(small)}, []string{n, n}
		}},
		{"a shrunk image before-request restored", func(t *testing.T, e *routesEnv) ([]block, []string) {
			b, name := restored(t, e, wide)
			if name != images.Name(wide) {
				t.Fatalf("after-tool named it %s, want the name of the base64 as received", name)
			}
			return []block{b}, []string{name}
		}},
		{"a restored image that is not shrunk", func(t *testing.T, e *routesEnv) ([]block, []string) {
			b, name := restored(t, e, small)
			return []block{b}, []string{name}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range inlineRoutes {
				t.Run(r.name, func(t *testing.T) {
					e := newRoutesEnv(t)
					blocks, want := tt.request(t, e)
					status, out, got := r.send(t, e, blocks)
					if status != http.StatusOK {
						t.Fatalf("status %d: %s", status, out)
					}
					if strings.Join(got, " ") != strings.Join(want, " ") {
						t.Fatalf("refs %v, want %v", got, want)
					}
					if n := e.imageKeys(); n != 1 {
						t.Fatalf("%d images stored, want 1", n)
					}
				})
			}
		})
	}
}

func TestRefusedRequestStoresNothing(t *testing.T) {
	var good []block
	for i := range 8 {
		good = append(good, imageBlock(b64(pngBytes(t, gradient(8+i, 8)))))
	}
	tests := []struct {
		name  string
		ninth string
	}{
		{"not an image", b64([]byte("BM not a picture at all"))},
		{"not base64", "#### not base64 ####"},
		{"too large to decode", b64(withDeclaredSize(t, pngBytes(t, gradient(4, 4)), 30_000, 30_000))},
		{"a 16-bit PNG that decodes past the budget", b64(bombPNG(t, 7071, 7071))},
		{"a PNG cut in half", b64(cut(pngBytes(t, noise(64, 64)), 0.5))},
		{"a PNG with random image data", b64(randomIDAT(t, pngBytes(t, noise(64, 64))))},
		{"a JPEG cut at 40%", b64(cut(jpegBytes(t, noise(64, 64)), 0.4))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range inlineRoutes {
				t.Run(r.name, func(t *testing.T) {
					e := newRoutesEnv(t)
					status, out, _ := r.send(t, e, append(good[:8:8], imageBlock(tt.ninth)))
					var a struct{ Error struct{ Field string } }
					json.Unmarshal(out, &a)
					if want := r.field + "[8].data"; status != http.StatusBadRequest || a.Error.Field != want {
						t.Fatalf("status %d field %q, want 400 naming %s: %s", status, a.Error.Field, want, out)
					}
					if e.blobs.Puts() != 0 || e.imageKeys() != 0 {
						t.Fatalf("%d puts, %d images stored; a refused request stores nothing", e.blobs.Puts(), e.imageKeys())
					}
				})
			}
		})
	}
}
