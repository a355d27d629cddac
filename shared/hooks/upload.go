package hooks

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// DefaultUploadTTL is how long an upload target works.
const DefaultUploadTTL = 15 * time.Minute

// UploadStore is the image store uploads land in (images.Store).
type UploadStore interface {
	// Head tells whether an image is stored.
	Head(ctx context.Context, tenant, name string) (store.BlobInfo, error)
	// Accept checks uploaded bytes as an inline image and stores them.
	Accept(ctx context.Context, tenant, name string, data []byte) error
}

// UploadRefs records the images of uploads for their chats
// (lifecycle.Chats): Hold when a target is asked for; Uploaded admits the
// bytes a local target receives only while a chat names their image.
type UploadRefs interface {
	References
	Uploaded(ctx context.Context, tenant, name string, write func(context.Context) error) error
}

// Uploads serves direct uploads: POST /v1/chats/{chat}/uploads gives a
// host a short-lived target to PUT an image's bytes to, so an image of up
// to images.MaxUploadBytes never passes through a request to durachat. The
// host then sends the image's ref block in place of its base64.
//
// The image is recorded for the chat in the route (Refs) before the
// target is made: deleting the chat deletes it, and its upload if it was
// never claimed, when no other chat names it. A local target whose chat
// was deleted, its image named by no other chat, is refused (Accept); an
// S3 target cannot be, and what it receives stays staged, named by no
// chat, until the bucket's rule expires it.
type Uploads struct {
	Images  UploadStore
	Targets store.Uploader
	Refs    UploadRefs
	TTL     time.Duration // 0 is DefaultUploadTTL
}

// NewUploads returns Uploads storing into imgs with targets made by t, the
// images recorded for their chats in refs.
func NewUploads(imgs UploadStore, t store.Uploader, refs UploadRefs) *Uploads {
	return &Uploads{Images: imgs, Targets: t, Refs: refs}
}

// Register adds the upload route to mux.
func (u *Uploads) Register(mux *http.ServeMux) {
	api.Handle(mux, "POST /v1/chats/{chat}/uploads", u.create)
}

type uploadRequest struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Type   string `json:"type"`
	SHA256 string `json:"sha256"`
}

type uploadAnswer struct {
	Name   string              `json:"name"`
	Stored bool                `json:"stored"`
	Upload *store.UploadTarget `json:"upload"`
}

func (u *Uploads) create(w http.ResponseWriter, r *http.Request) error {
	var req uploadRequest
	tenant, chat, err := readHook(r, &req)
	if err != nil {
		return err
	}
	up, err := req.check()
	if err != nil {
		return err
	}
	if u.Targets == nil {
		return api.NotFound("direct uploads are not enabled here: this deployment has no image bucket")
	}
	ctx := r.Context()
	if _, err := u.Refs.Hold(ctx, tenant, chat, []string{req.Name}, nil); err != nil {
		return err
	}
	_, err = u.Images.Head(ctx, tenant, req.Name)
	switch {
	case err == nil:
		api.WriteJSON(w, http.StatusOK, uploadAnswer{Name: req.Name, Stored: true})
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	ttl := u.TTL
	if ttl <= 0 {
		ttl = DefaultUploadTTL
	}
	target, err := u.Targets.UploadTarget(ctx, store.UploadKey(tenant, req.Name), up, ttl)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, uploadAnswer{Name: req.Name, Upload: &target})
	return nil
}

// check validates an upload request and returns the object it describes.
func (req uploadRequest) check() (store.Upload, error) {
	if !refs.ValidName(req.Name) {
		return store.Upload{}, api.BadRequest("name", "name %q is not an image name: the first 16 lowercase hex digits of the SHA-256 of the image's standard base64", req.Name)
	}
	switch {
	case req.Size <= 0:
		return store.Upload{}, api.BadRequest("size", "size must be the image's byte count, not %d", req.Size)
	case req.Size > images.MaxUploadBytes:
		return store.Upload{}, &fault.Error{Code: fault.TooLarge, Field: "size",
			Message: fmt.Sprintf("an upload is at most %d bytes, not %d", images.MaxUploadBytes, req.Size)}
	}
	switch req.Type {
	case images.PNG, images.JPEG, images.GIF, images.WebP:
	default:
		return store.Upload{}, api.BadRequest("type", "type %q is not image/png, image/jpeg, image/gif or image/webp", req.Type)
	}
	sum, err := hex.DecodeString(req.SHA256)
	if err != nil || len(sum) != 32 {
		return store.Upload{}, api.BadRequest("sha256", "sha256 must be the SHA-256 of the image's bytes as 64 hex digits")
	}
	up := store.Upload{Size: req.Size, ContentType: req.Type}
	copy(up.SHA256[:], sum)
	return up, nil
}

// Accept takes the bytes a host PUT to a local upload target (see
// embedded.Linker.UploadHandler): they are checked like an inline image and
// stored at once, so a refused upload leaves nothing behind. They are
// stored only for an image a chat names (Refs.Uploaded): a target whose
// chat was deleted is refused with 410.
func (u *Uploads) Accept(ctx context.Context, key string, data []byte) error {
	tenant, name, ok := store.ParseUploadKey(key)
	if !ok {
		return api.BadRequest("", "%q is not an upload key", key)
	}
	return u.Refs.Uploaded(ctx, tenant, name, func(ctx context.Context) error {
		return refusal("body", u.Images.Accept(ctx, tenant, name, data))
	})
}

// refusal turns an image the images package refused into a 400 naming
// field; any other error (a store failure) is returned as it is.
func refusal(field string, err error) error {
	if err != nil && images.Refused(err) {
		return api.BadRequest(field, "%s: %v", field, err)
	}
	return err
}
