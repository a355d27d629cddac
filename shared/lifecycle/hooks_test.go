package lifecycle_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// pngFor is pngB64 with one pixel of its own for the test: the backends
// "aws" and "dynalite" share one bucket, and an image one of them stored
// must not be there already for the other.
func pngFor(t *testing.T, c color.RGBA) string {
	t.Helper()
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	sum := h.Sum32()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, c)
		}
	}
	img.Set(0, 0, color.RGBA{uint8(sum), uint8(sum >> 8), uint8(sum >> 16), 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// afterTool sends a tool result carrying the image through the chat's
// after-tool hook and returns the names it stored.
func (e *env) afterTool(tenant, chat, b64 string) []string {
	e.t.Helper()
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/hooks/after-tool", map[string]any{
		"call": map[string]any{"id": "c1", "name": "screenshot"},
		"result": map[string]any{"content": []map[string]any{
			{"type": "text", "text": "shot"}, {"type": "image", "data": b64, "mimeType": "image/png"}}}})
	if code != http.StatusOK {
		e.t.Fatalf("after-tool of %s: %d %s", chat, code, body)
	}
	var a struct{ Stored []string }
	if err := json.Unmarshal(body, &a); err != nil {
		e.t.Fatal(err)
	}
	return a.Stored
}

// offloadInput sends a user message carrying the image through the chat's
// offload-input hook.
func (e *env) offloadInput(tenant, chat, b64 string) []string {
	e.t.Helper()
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/hooks/offload-input", map[string]any{
		"message": map[string]any{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "see"}, {"type": "image", "data": b64, "mimeType": "image/png"}}}})
	if code != http.StatusOK {
		e.t.Fatalf("offload-input of %s: %d %s", chat, code, body)
	}
	var a struct{ Stored []string }
	if err := json.Unmarshal(body, &a); err != nil {
		e.t.Fatal(err)
	}
	return a.Stored
}

// upload uploads the image directly for the chat, as a host does: it asks
// for a target, then PUTs the bytes (S3 stages them until a ref claims
// them; the local server checks them as they arrive). It returns the name.
func (e *env) upload(tenant, chat, b64 string) string {
	e.t.Helper()
	target := e.uploadTarget(tenant, chat, b64)
	if err := e.putUpload(tenant, b64, target); err != nil {
		e.t.Fatalf("PUT the upload: %v", err)
	}
	return images.Name(b64)
}

// uploadTarget asks for a target to upload the image to for the chat.
func (e *env) uploadTarget(tenant, chat, b64 string) store.UploadTarget {
	e.t.Helper()
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		e.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/uploads", map[string]any{
		"name": images.Name(b64), "size": len(data), "type": "image/png", "sha256": hex.EncodeToString(sum[:])})
	if code != http.StatusOK {
		e.t.Fatalf("upload target for %s: %d %s", chat, code, body)
	}
	var a struct {
		Stored bool
		Upload *store.UploadTarget
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Upload == nil {
		e.t.Fatalf("upload answer %s: want a target", body)
	}
	return *a.Upload
}

// putUpload PUTs the image's bytes to its target and returns the refusal:
// locally what the local server's upload handler answers (the error its
// Accept returns), in AWS a PUT to the presigned URL answered other than 2xx.
func (e *env) putUpload(tenant, b64 string, target store.UploadTarget) error {
	e.t.Helper()
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.b.Name == "embedded" {
		// What the local server's upload handler does with the PUT.
		return e.uploads.Accept(e.t.Context(), store.UploadKey(tenant, images.Name(b64)), data)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), target.Method, target.URL, bytes.NewReader(data))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range target.Header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%d %s", res.StatusCode, out)
	}
	return nil
}

// stored reports whether the tenant's image is stored.
func (e *env) stored(tenant, name string) bool {
	e.t.Helper()
	_, err := e.b.Blobs.Head(e.t.Context(), store.ImageKey(tenant, name))
	if err != nil && !store.IsOutage(err) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// An image a chat's hook stored is that chat's before it logs it: another
// chat logging the same image and being deleted leaves it stored.
func TestAnImageAChatsHookStoredOutlivesTheDeletionOfAnotherChatNamingIt(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			viaTool := pngFor(t, color.RGBA{1, 100, 1, 255})
			viaInput := pngFor(t, color.RGBA{2, 100, 2, 255})
			viaUpload := pngFor(t, color.RGBA{3, 100, 3, 255})
			names := []string{e.afterTool("alice", "b", viaTool)[0], e.offloadInput("alice", "b", viaInput)[0], e.upload("alice", "b", viaUpload)}
			if e.b.Name != "embedded" {
				// B claims its upload through after-tool, as a host does.
				code, body := e.do("alice", "POST", "/v1/chats/b/hooks/after-tool", map[string]any{
					"call":   map[string]any{"id": "c2", "name": "read"},
					"result": map[string]any{"content": []map[string]any{{"type": "text", "text": refs.Ref(names[2])}}}})
				if code != http.StatusOK {
					t.Fatalf("claiming the upload: %d %s", code, body)
				}
			}
			e.append("alice", "a", withImage("one", viaTool), withImage("two", viaInput), withImage("three", viaUpload))
			if _, a := e.delete("alice", "a"); !a.Deleted || a.Progress.Images != 0 {
				t.Fatalf("delete = %+v, want no image deleted: chat b holds them all", a)
			}
			for _, name := range names {
				if !e.stored("alice", name) {
					t.Fatalf("image %s, stored by chat b's hooks, went with chat a", name)
				}
			}
			// B logs what its hooks answered with, and restores it.
			for _, name := range names {
				if code, body := e.appendCode("alice", "b", refMessage(name)); code != http.StatusOK {
					t.Fatalf("b's append of its own ref %s = %d %s", name, code, body)
				}
			}
			code, body := e.do("alice", "POST", "/v1/chats/b/hooks/before-request", map[string]any{
				"format": "anthropic", "request": map[string]any{"model": "m", "max_tokens": 10, "messages": []map[string]any{
					{"role": "user", "content": []map[string]any{{"type": "text", "text": refs.Ref(names[0])}}}}}})
			if code != http.StatusOK || bytes.Contains(body, []byte("not_found")) {
				t.Fatalf("b's before-request = %d %.300s, want its image restored", code, body)
			}
		})
	}
}

// Images stored only through a chat's hooks go with the chat: after-tool,
// offload-input, and a direct upload (claimed or not).
func TestImagesStoredOnlyThroughAChatsHooksAreDeletedWithIt(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			viaTool := e.afterTool("alice", "h", pngFor(t, color.RGBA{10, 200, 10, 255}))[0]
			viaInput := e.offloadInput("alice", "h", pngFor(t, color.RGBA{20, 200, 20, 255}))[0]
			unclaimed := e.upload("alice", "h", pngFor(t, color.RGBA{30, 200, 30, 255}))
			shared := pngFor(t, color.RGBA{40, 200, 40, 255})
			e.afterTool("alice", "h", shared)
			e.append("alice", "other", withImage("mine too", shared))
			if l := e.list("alice", ""); len(l.Chats) != 2 || l.Chats[0].Chat != "h" {
				t.Fatalf("chats = %+v, want the chat used only through its hooks listed", l)
			}
			h := e.current("alice", "h")
			if _, a := e.delete("alice", "h"); !a.Deleted {
				t.Fatalf("delete = %+v", a)
			}
			for _, name := range []string{viaTool, viaInput, unclaimed} {
				if e.stored("alice", name) {
					t.Fatalf("image %s, stored only through the deleted chat's hooks, is still stored", name)
				}
			}
			if _, err := e.b.Blobs.Head(t.Context(), store.UploadKey("alice", unclaimed)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the deleted chat's staged upload: %v, want it gone", err)
			}
			if !e.stored("alice", images.Name(shared)) {
				t.Fatal("the image another chat logged went with the chat whose hook stored it too")
			}
			if left := e.partition(h); len(left) != 0 {
				t.Fatalf("the deleted chat left %v", left)
			}
		})
	}
}

// Retention deletes a chat used only through its hooks, with its images.
func TestRetentionDeletesTheImagesOfAChatUsedOnlyThroughItsHooks(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			e := newEnvAt(t, b, 0, func() time.Time { return time.UnixMilli(clock.Load()) })
			name := e.afterTool("alice", "h", pngFor(t, color.RGBA{50, 5, 5, 255}))[0]
			if code, body := e.do("alice", "PUT", "/v1/retention", map[string]any{"days": 1}); code != http.StatusOK {
				t.Fatalf("PUT retention: %d %s", code, body)
			}
			clock.Add((48 * time.Hour).Milliseconds())
			if n, err := e.chats.ExpireAll(t.Context()); err != nil || n != 1 {
				t.Fatalf("sweep = %d, %v, want the chat expired", n, err)
			}
			e.drain()
			if e.stored("alice", name) {
				t.Fatal("the expired chat's hook image survived")
			}
		})
	}
}

// A hook for a chat being deleted is refused, as an append is: what it
// would store could outlive the deletion.
func TestAHookForAChatBeingDeletedIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends(t)[0], 1)
	var msgs []map[string]any
	for i := range 2*100 + 1 {
		msgs = append(msgs, user(strings.Repeat("x", i%7+1)))
	}
	e.append("alice", "big", msgs...)
	big := e.current("alice", "big")
	if code, a := e.delete("alice", "big"); code != http.StatusAccepted || a.Deleted {
		t.Fatalf("delete = %d %+v, want it under way", code, a)
	}
	code, body := e.do("alice", "POST", "/v1/chats/big/hooks/after-tool", map[string]any{
		"call": map[string]any{"id": "c1", "name": "screenshot"},
		"result": map[string]any{"content": []map[string]any{
			{"type": "image", "data": pngFor(t, color.RGBA{60, 6, 6, 255}), "mimeType": "image/png"}}}})
	if code != http.StatusConflict || !strings.Contains(string(body), "being deleted") {
		t.Fatalf("after-tool during the deletion = %d %s, want 409", code, body)
	}
	e.drain()
	if keys := e.partition(big); len(keys) != 0 {
		t.Fatalf("left after the deletion: %v", keys)
	}
}
