package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/textcut"
)

// Image is a stored image.
type Image struct {
	Name     string // the name its refs ([image <name>]) carry
	MimeType string
	Data     []byte
}

// Store keeps each tenant's images once, under store.ImageKey(tenant, name).
type Store struct {
	Blobs store.Blobs
	// Staging holds direct uploads until a ref claims them (Claim); nil
	// where uploads are checked as they arrive.
	Staging Staging
}

// New returns a Store over blobs.
func New(blobs store.Blobs) *Store { return &Store{Blobs: blobs} }

// Put shrinks the image if it must be (see Shrink) and stores it, returning
// its name: Name of b64 as received. Putting a stored image again is a
// no-op that returns the same name. Bad input is ErrInvalidBase64,
// ErrUnsupported or ErrTooLarge; a store
// failure is wrapped, so errors.Is(err, store.ErrUnavailable) holds.
func (s *Store) Put(ctx context.Context, tenant, b64 string) (name string, err error) {
	p, err := Shrink(ctx, b64)
	if err != nil {
		return "", err
	}
	if err := s.PutPrepared(ctx, tenant, p); err != nil {
		return "", err
	}
	return p.Name, nil
}

// PutPrepared stores an image Shrink has prepared under p.Name, for a caller
// that checks several images before storing any: the base64 is decoded once,
// by Shrink, not again here. Like Put, storing it again is a no-op.
func (s *Store) PutPrepared(ctx context.Context, tenant string, p Prepared) error {
	if tenant == "" {
		return errors.New("images: put: empty tenant")
	}
	if !refs.ValidName(p.Name) || p.MimeType == "" || len(p.Data) == 0 {
		return fmt.Errorf("images: put %q: not an image prepared by Shrink", p.Name)
	}
	err := s.Blobs.Put(ctx, store.ImageKey(tenant, p.Name), store.Blob{ContentType: p.MimeType, Data: p.Data})
	if err != nil {
		return fmt.Errorf("images: put %s: %w", p.Name, err)
	}
	return nil
}

// Get returns a stored image of tenant, its MimeType always one of the
// accepted formats'. An image never stored, or a name that cannot be one,
// is store.ErrNotFound (wrapped).
func (s *Store) Get(ctx context.Context, tenant, name string) (Image, error) {
	key, err := imageKey(tenant, name)
	if err != nil {
		return Image{}, err
	}
	b, err := s.Blobs.Get(ctx, key)
	if err != nil {
		return Image{}, fmt.Errorf("images: get %s: %w", name, err)
	}
	mimeType := b.ContentType
	switch mimeType {
	case PNG, JPEG, GIF, WebP:
	default:
		// Stored without a type, or with one no image format names, by
		// something other than Put: the bytes tell. This is the one place
		// a stored image's type is sniffed.
		if mimeType, err = Detect(b.Data); err != nil {
			return Image{}, fmt.Errorf("images: get %s: %w", name, err)
		}
	}
	return Image{Name: name, MimeType: mimeType, Data: b.Data}, nil
}

// Head returns the content type and size of a stored image without reading
// it, or store.ErrNotFound (wrapped).
func (s *Store) Head(ctx context.Context, tenant, name string) (store.BlobInfo, error) {
	key, err := imageKey(tenant, name)
	if err != nil {
		return store.BlobInfo{}, err
	}
	info, err := s.Blobs.Head(ctx, key)
	if err != nil {
		return store.BlobInfo{}, fmt.Errorf("images: head %s: %w", name, err)
	}
	return info, nil
}

// Delete deletes an image of tenant with all it leaves in the blobs: its
// description first (what the image showed leaves with it, and a retry
// after a failure between the two finds the image still there to delete),
// then an upload of it still waiting to be claimed, then the image.
// Deleting what is not there is no error, and a name no Put makes has
// nothing there. The caller decides that no chat names the image any more.
func (s *Store) Delete(ctx context.Context, tenant, name string) error {
	key, err := imageKey(tenant, name)
	if err != nil {
		return nil
	}
	if err := s.Blobs.Delete(ctx, store.DescriptionKey(tenant, name)); err != nil {
		return fmt.Errorf("images: deleting the description of %s: %w", name, err)
	}
	if err := s.Blobs.Delete(ctx, store.UploadKey(tenant, name)); err != nil {
		return fmt.Errorf("images: deleting the upload of %s: %w", name, err)
	}
	if err := s.Blobs.Delete(ctx, key); err != nil {
		return fmt.Errorf("images: deleting %s: %w", name, err)
	}
	return nil
}

// imageKey refuses names that no Put makes, so a crafted name cannot reach
// outside the tenant's images.
func imageKey(tenant, name string) (string, error) {
	if tenant == "" || !refs.ValidName(name) {
		return "", fmt.Errorf("images: no image %q for tenant %q: %w", name, tenant, store.ErrNotFound)
	}
	return store.ImageKey(tenant, name), nil
}

// MaxDescription is the most bytes of an image's description.
const MaxDescription = 300

// PutDescription stores the description of an image of tenant, once: an
// image described already keeps its first description, so an image that
// several chats name is described once. The text is made one line of at
// most MaxDescription bytes (CleanDescription); an empty one is an error.
func (s *Store) PutDescription(ctx context.Context, tenant, name, text string) error {
	if _, err := imageKey(tenant, name); err != nil {
		return err
	}
	text = CleanDescription(text)
	if text == "" {
		return fmt.Errorf("images: describe %s: empty description", name)
	}
	err := s.Blobs.Put(ctx, store.DescriptionKey(tenant, name), store.Blob{ContentType: "text/plain; charset=utf-8", Data: []byte(text)})
	if err != nil {
		return fmt.Errorf("images: describe %s: %w", name, err)
	}
	return nil
}

// Description returns the description of an image of tenant, or
// store.ErrNotFound (wrapped) while it has none. It is read from beside the
// image, so it stays readable when the image itself is gone.
func (s *Store) Description(ctx context.Context, tenant, name string) (string, error) {
	if _, err := imageKey(tenant, name); err != nil {
		return "", err
	}
	b, err := s.Blobs.Get(ctx, store.DescriptionKey(tenant, name))
	if err != nil {
		return "", fmt.Errorf("images: description of %s: %w", name, err)
	}
	// Written by PutDescription; cleaned again so that whatever else wrote
	// the key never reaches a request as more than a line.
	return CleanDescription(string(b.Data)), nil
}

// CleanDescription makes text a description: valid UTF-8, one line (runs
// of whitespace become one space), square brackets made round so that it
// cannot end or forge the "[image <name>: ...]" it is shown in, and cut to
// MaxDescription bytes on a character boundary.
func CleanDescription(text string) string {
	text = strings.ToValidUTF8(text, "")
	// Control characters go as whitespace does: JSON would carry each as
	// a six-byte escape, and a reader sees nothing.
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
	text = strings.Join(strings.Fields(text), " ")
	text = strings.NewReplacer("[", "(", "]", ")").Replace(text)
	return strings.TrimSpace(textcut.Head(text, MaxDescription))
}
