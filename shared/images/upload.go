package images

import (
	"context"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/parallel"
	"github.com/durachat/durachat/shared/store"
)

// MaxUploadBytes is the largest image a host may upload directly. It is
// checked and shrunk like any inline image once it lands.
const MaxUploadBytes = 16 << 20

var (
	// ErrNotUploaded: a ref names an image the tenant does not hold and
	// whose upload was never completed (or has expired).
	ErrNotUploaded = errors.New("not stored and no completed upload of it")
	// ErrNameMismatch: an upload's bytes do not have the name it was asked
	// for.
	ErrNameMismatch = errors.New("the uploaded bytes do not have the name of the upload")
)

// Staging is where direct uploads wait to be checked (the bucket's uploads/
// prefix in S3). A Store without one checks uploads as they arrive (the
// local server does), so a ref names a stored image or nothing.
type Staging interface {
	Head(ctx context.Context, key string) (store.BlobInfo, error)
	Get(ctx context.Context, key string) (store.Blob, error)
	Delete(ctx context.Context, key string) error
}

// Accept checks uploaded bytes exactly as an inline image is checked
// (ShrinkBytes: Shrink without making their base64) and stores them under
// name. The bytes
// must have that name: the Name of their standard base64, the name the
// same image gets inline, so an image is stored once whichever way it came.
// Refused bytes are ErrInvalidBase64, ErrUnsupported, ErrTooLarge or
// ErrNameMismatch; nothing is stored.
func (s *Store) Accept(ctx context.Context, tenant, name string, data []byte) error {
	if len(data) > MaxUploadBytes {
		return badImage(ErrTooLarge, fmt.Sprintf("%d bytes uploaded, limit %d", len(data), MaxUploadBytes), nil)
	}
	p, err := ShrinkBytes(ctx, data)
	if err != nil {
		return err
	}
	if p.Name != name {
		return fmt.Errorf("images: upload %s: %w (they are %s)", name, ErrNameMismatch, p.Name)
	}
	return s.PutPrepared(ctx, tenant, p)
}

// Claim makes sure tenant holds the image name, for a ref a host sends in
// place of an image it uploaded: a stored image is claimed as it is; an
// upload waiting in Staging is checked (Accept) and stored, and its staged
// copy deleted whether it passed or not. A name with neither is
// ErrNotUploaded; refused bytes are Accept's errors; a store failure is
// wrapped (store.IsOutage tells an outage).
func (s *Store) Claim(ctx context.Context, tenant, name string) error {
	_, err := s.Head(ctx, tenant, name)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Staging == nil {
		return fmt.Errorf("images: %s: %w", name, ErrNotUploaded)
	}
	key := store.UploadKey(tenant, name)
	b, err := s.Staging.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("images: %s: %w", name, ErrNotUploaded)
	}
	if err != nil {
		return fmt.Errorf("images: reading upload %s: %w", name, err)
	}
	err = s.Accept(ctx, tenant, name, b.Data)
	if store.IsOutage(err) {
		// Keep the upload: the claim may be retried.
		return err
	}
	// Stored or refused, the staged copy has served; a failed delete is
	// left to the prefix's expiry.
	_ = s.Staging.Delete(ctx, key)
	return err
}

// Locate tells where the image name of tenant is, without claiming it:
// stored (true), or waiting as an upload (false). A name with neither is
// ErrNotUploaded; a store failure is wrapped.
func (s *Store) Locate(ctx context.Context, tenant, name string) (stored bool, err error) {
	_, err = s.Head(ctx, tenant, name)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return err == nil, err
	}
	if s.Staging == nil {
		return false, fmt.Errorf("images: %s: %w", name, ErrNotUploaded)
	}
	_, err = s.Staging.Head(ctx, store.UploadKey(tenant, name))
	if errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("images: %s: %w", name, ErrNotUploaded)
	}
	if err != nil {
		return false, fmt.Errorf("images: looking for upload %s: %w", name, err)
	}
	return false, nil
}

// Claimer claims the images refs name (Store.Locate, Store.Claim).
type Claimer interface {
	Locate(ctx context.Context, tenant, name string) (stored bool, err error)
	Claim(ctx context.Context, tenant, name string) error
}

// ClaimAll claims each distinct name of a request, Parallel at a time:
// first it locates them all, so a request naming nothing for one ref
// claims none of its uploads; then it claims those waiting as uploads.
// When any fails, it returns the index in names of the first that failed
// and its error; else -1 and nil.
func ClaimAll(ctx context.Context, c Claimer, tenant string, names []string) (int, error) {
	first := map[string]int{}
	var distinct []int
	for i, name := range names {
		if _, ok := first[name]; !ok {
			first[name] = i
			distinct = append(distinct, i)
		}
	}
	errs := make([]error, len(names))
	stored := make([]bool, len(names))
	each := func(fn func(i int)) {
		parallel.Each(len(distinct), Parallel, func(k int) { fn(distinct[k]) })
	}
	failed := func() (int, error) {
		for i, name := range names {
			if err := errs[first[name]]; err != nil {
				return i, err
			}
		}
		return -1, nil
	}
	each(func(i int) { stored[i], errs[i] = c.Locate(ctx, tenant, names[i]) })
	if i, err := failed(); err != nil {
		return i, err
	}
	each(func(i int) {
		if !stored[i] {
			errs[i] = c.Claim(ctx, tenant, names[i])
		}
	})
	return failed()
}

// Refused reports whether err refuses an image for what it is (its bytes,
// its name, or no upload of it), not for a store failure.
func Refused(err error) bool {
	return malformed(err) || errors.Is(err, ErrNameMismatch) || errors.Is(err, ErrNotUploaded)
}
