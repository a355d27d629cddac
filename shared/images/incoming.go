package images

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/parallel"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// Parallel bounds the prepares and the puts of one request's images: enough
// to overlap store round trips and use the cores, few enough to keep the
// work of one request small.
const Parallel = 4

// Inline is one inline image of a request.
type Inline struct {
	// B64 is the image's base64 text as received.
	B64 string
	// Named is the name the request says the image is stored under (a zoom
	// result's image, or one before-request restored), or "".
	Named string
	// Restore stores the image under Named when the store has nothing
	// under that name and Named is the name of its bytes (of their
	// standard base64: the request carries the bytes stored under Named
	// before, a zoom result's image whose stored copy was deleted
	// meanwhile). Bytes that are not the name's, and bytes Shrink had to
	// re-encode, are stored under their own name as usual: no request
	// binds a name to other bytes.
	Restore bool
	// Field is the image's place in the request, its JSON path
	// ("messages[0].content[1].data"), which a refusal names.
	Field string
}

// Writer is the image store an Incoming is stored in (Store).
type Writer interface {
	// PutPrepared stores a prepared image, once, under its name.
	PutPrepared(ctx context.Context, tenant string, p Prepared) error
	// Head tells whether a named image is stored, and its size, or
	// store.ErrNotFound.
	Head(ctx context.Context, tenant, name string) (store.BlobInfo, error)
	// Get returns a stored image, or store.ErrNotFound.
	Get(ctx context.Context, tenant, name string) (Image, error)
}

// Incoming is the inline images of one request, every one checked and
// prepared before any is stored: a request refused for one image stores
// none. Every route that takes inline images stores them through an
// Incoming, so an image gets the same name whichever route it came
// through.
type Incoming struct {
	jobs []*job
	of   []*job // the job of each image, in request order
}

// job is one distinct image: the images of a request that are the same
// share it, and it is prepared and stored once.
type job struct {
	Inline
	prepared Prepared // its bytes are dropped once stored
	err      error
	name     string
}

// jobKey tells images apart: by the name they say they are stored under,
// else by their base64 text (the text itself; hashing it here would copy
// it).
type jobKey struct{ named, b64 string }

// MaxRequestImages bounds the distinct images one request may carry: each
// costs a decode and a store write, and no model takes even a tenth of it
// in one request.
const MaxRequestImages = 1000

// ErrTooMany refuses the first image past MaxRequestImages.
var ErrTooMany = fmt.Errorf("one image more than the %d distinct images a request may carry", MaxRequestImages)

// Prepare checks and prepares every image of a request (Shrink), equal
// images once. A request of more than MaxRequestImages distinct images is
// refused before any is decoded. When any is refused, the error is a bad
// request (a *fault.Error) naming the Field of the first refused image in
// request order, its cause what is wrong with that image; when the decode
// budget stayed in use (ErrBusy) or ctx ended, that error.
func Prepare(ctx context.Context, imgs []Inline) (*Incoming, error) {
	inc := &Incoming{of: make([]*job, len(imgs))}
	byKey := map[jobKey]*job{}
	for i, in := range imgs {
		key := jobKey{b64: in.B64}
		if refs.ValidName(in.Named) {
			key = jobKey{named: in.Named}
		} else {
			in.Named = ""
		}
		j := byKey[key]
		if j == nil {
			j = &job{Inline: in} // the first image showing it
			byKey[key] = j
			inc.jobs = append(inc.jobs, j)
		}
		inc.of[i] = j
	}
	if len(inc.jobs) > MaxRequestImages {
		return nil, refusal(inc.jobs[MaxRequestImages].Inline, ErrTooMany)
	}
	inc.each(func(j *job) { j.prepared, j.err = Shrink(ctx, j.B64) })
	for _, j := range inc.jobs {
		if malformed(j.err) {
			return nil, refusal(j.Inline, j.err)
		}
	}
	for _, j := range inc.jobs {
		if j.err != nil {
			return nil, j.err
		}
	}
	return inc, nil
}

// refusal is the request refused for image in, because of err: a bad
// request naming its field, which tells the caller err.
func refusal(in Inline, err error) *fault.Error {
	return &fault.Error{Code: fault.BadRequest, Field: in.Field, Message: in.Field, Err: err}
}

// Names lists, each once, the names the request's images may be stored
// under: each image's own, and the one it says it is stored under. A
// caller that records its references to images before it stores them (so
// that no deletion removes what it stores) records them all.
func (inc *Incoming) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, j := range inc.jobs {
		for _, name := range []string{j.prepared.Name, j.Named} {
			if name != "" && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// Stored is what became of one image of a stored Incoming.
type Stored struct {
	// Name is the name the image's refs carry, when it is stored.
	Name string
	// Err says why it is not stored: the store failed, or cannot say
	// whether it holds the name the image carries.
	Err error
}

// Store stores each distinct image of the request once and returns what
// became of each image of the request, in order.
//
// An image that says it is stored under a name keeps that name only when
// its bytes are the name's: the name is that of its base64 as received,
// or the store holds exactly these bytes under it (a shrunk copy, sent
// back as before-request restored it, whose own name differs). Otherwise
// it is stored under Name of its base64 as received, like any other, so no
// request can bind a name to other bytes, nor have its bytes replaced by
// those of the name it carries.
func (inc *Incoming) Store(ctx context.Context, w Writer, tenant string) []Stored {
	inc.each(func(j *job) { j.store(ctx, w, tenant) })
	out := make([]Stored, len(inc.of))
	for i, j := range inc.of {
		out[i] = Stored{Name: j.name, Err: j.err}
	}
	return out
}

func (j *job) store(ctx context.Context, w Writer, tenant string) {
	// The store has the bytes once this returns; the request need not keep them.
	defer func() { j.prepared.Data = nil }()
	if j.Named != "" {
		held, err := holds(ctx, w, tenant, j.Named, j.prepared)
		if err != nil {
			// Not knowing whether it is stored, do not risk a second key.
			j.err = err
			return
		}
		if held {
			j.name = j.Named
			return
		}
		if j.Restore && namesBytes(j.Named, j.prepared) {
			// Not stored, and the name is that of these very bytes.
			if err := w.PutPrepared(ctx, tenant, Prepared{Name: j.Named, MimeType: j.prepared.MimeType, Data: j.prepared.Data}); err != nil {
				j.err = err
				return
			}
			j.name = j.Named
			return
		}
		// Not stored under that name (or other bytes): an image like any other.
	}
	if err := w.PutPrepared(ctx, tenant, j.prepared); err != nil {
		j.err = err
		return
	}
	j.name = j.prepared.Name
}

// namesBytes reports whether name is the name of p's bytes as the store
// keeps them: of their standard base64, as an upload of them is named.
func namesBytes(name string, p Prepared) bool {
	return !p.Shrunk && (name == p.Name || name == Name(base64.StdEncoding.EncodeToString(p.Data)))
}

// holds reports whether the store holds p's image under name. Under p's
// own name it holds what p was stored as, so a Head tells. Under another
// name it must hold p's very bytes: a stored image is within the limits,
// so its bytes come back unshrunk, and a shrunk copy is never the stored
// one.
func holds(ctx context.Context, w Writer, tenant, name string, p Prepared) (bool, error) {
	if name == p.Name {
		_, err := w.Head(ctx, tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if p.Shrunk {
		return false, nil
	}
	return sameBytes(ctx, w, tenant, name, p.Data)
}

// sameBytes reports whether the store holds data under name; bytes of
// another size are not read.
func sameBytes(ctx context.Context, w Writer, tenant, name string, data []byte) (bool, error) {
	info, err := w.Head(ctx, tenant, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && info.Size != int64(len(data))) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	img, err := w.Get(ctx, tenant, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(img.Data, data), nil
}

// Names reports whether name is the name of the image b64 carries, without
// decoding it as an image: the name of b64 itself, or of the very bytes the
// tenant holds under name (a shrunk image's copy, sent back as restored).
// Bytes that are neither are another image, whatever name they carry.
func (s *Store) Names(ctx context.Context, tenant, name, b64 string) (bool, error) {
	if Name(b64) == name {
		return true, nil
	}
	data, err := Decode(b64)
	if err != nil {
		return false, nil
	}
	return sameBytes(ctx, s, tenant, name, data)
}

// each runs fn on every job, Parallel at a time.
func (inc *Incoming) each(fn func(*job)) {
	parallel.Each(len(inc.jobs), Parallel, func(k int) { fn(inc.jobs[k]) })
}
