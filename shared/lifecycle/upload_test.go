package lifecycle_test

import (
	"errors"
	"image/color"
	"net/http"
	"slices"
	"testing"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
)

// An upload target outlives no chat. Bytes PUT to the target of a chat
// deleted since are never an image of the tenant's: the local server
// refuses them (410 expired) and stores nothing; S3 takes them, and they
// wait staged, never read as an image, until a ref claims them for a chat
// (which then names the image) or the bucket's rule expires them. When
// another chat asked for the same image, the bytes are that chat's, and
// deleting the first chat does not delete them.
func TestAnUploadTargetOfADeletedChatStoresNoImage(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			e := newEnvBuilding(t, kb.Backend, 0, nil, nil, settleSoon)
			before := kb.sortedKeys(t)
			// What S3 took for a deleted chat waits staged for the
			// bucket's rule.
			var staged []string
			left := func() []string {
				return slices.DeleteFunc(added(before, kb.sortedKeys(t)), func(k string) bool { return slices.Contains(staged, k) })
			}
			image := func(chat, name string) int {
				code, _ := e.do("alice", "GET", "/v1/chats/"+chat+"/images/"+name, nil)
				return code
			}

			t.Run("NoOtherChatNamesIt", func(t *testing.T) {
				img := pngFor(t, color.RGBA{30, 60, 90, 255})
				name := images.Name(img)
				target := e.uploadTarget("alice", "gone", img)
				e.deleteAll("alice", "gone")
				err := e.putUpload("alice", img, target)
				if kb.Name == "embedded" {
					if fe, ok := errors.AsType[*fault.Error](err); !ok || fe.Code != fault.Expired {
						t.Fatalf("PUT to the target of a deleted chat = %v, want 410 expired", err)
					}
				} else if err != nil {
					t.Fatalf("PUT to a presigned target: %v", err)
				}
				if code := image("gone", name); code != http.StatusNotFound {
					t.Fatalf("GET the image of the deleted chat's upload = %d, want 404", code)
				}
				e.drainUntil(func() bool { return !e.stored("alice", name) })
				if e.stored("alice", name) {
					t.Fatal("the image of the deleted chat's upload is stored")
				}
				if kb.Name != "embedded" {
					staged = append(staged, "blobs/"+store.UploadKey("alice", name))
				}
				if left := left(); len(left) != 0 {
					t.Errorf("keys left by the deleted chat's upload: %q", left)
				}
			})

			t.Run("AnotherChatNamesIt", func(t *testing.T) {
				img := pngFor(t, color.RGBA{90, 60, 30, 255})
				name := images.Name(img)
				target := e.uploadTarget("alice", "gone", img)
				e.uploadTarget("alice", "kept", img)
				e.deleteAll("alice", "gone")
				if err := e.putUpload("alice", img, target); err != nil {
					t.Fatalf("PUT to a target whose image another chat names: %v", err)
				}
				e.append("alice", "kept", refMessage(name))
				e.drain()
				if code := image("kept", name); code != http.StatusOK {
					t.Fatalf("GET the image the other chat names = %d, want 200", code)
				}
				e.deleteAll("alice", "kept")
				e.drainUntil(func() bool { return !e.stored("alice", name) })
				if left := left(); len(left) != 0 {
					t.Errorf("keys left once both chats are deleted: %q", left)
				}
			})
		})
	}
}
