package images_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"testing"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/testenv"
)

// failingWriter is a Writer whose heads or puts fail.
type failingWriter struct {
	*images.Store
	failHead, failPut bool
}

func (w failingWriter) Head(ctx context.Context, tenant, name string) (store.BlobInfo, error) {
	if w.failHead {
		return store.BlobInfo{}, testenv.Outage("head")
	}
	return w.Store.Head(ctx, tenant, name)
}

func (w failingWriter) PutPrepared(ctx context.Context, tenant string, p images.Prepared) error {
	if w.failPut {
		return testenv.Outage("put")
	}
	return w.Store.PutPrepared(ctx, tenant, p)
}

func TestARequestsImagesAreEachStoredOnceUnderOneName(t *testing.T) {
	small := b64(pngBytes(t, gradient(16, 16)))
	other := b64(pngBytes(t, gradient(12, 16)))
	wide := b64(pngBytes(t, gradient(2100, 8)))
	shrunk, err := images.Shrink(context.Background(), wide)
	if err != nil {
		t.Fatal(err)
	}
	restored := b64(shrunk.Data) // the stored copy, as before-request sends it back
	small64 := pngBytes(t, grayImage(64))
	twin := b64(sameSizeOther(t, small64))                  // other bytes of the same length
	wrapped := b64(small64)[:20] + "\n" + b64(small64)[20:] // the same bytes, other base64
	tests := []struct {
		name      string
		stored    []string // put first, as received
		imgs      []images.Inline
		failHead  bool
		failPut   bool
		wantNames []string
		wantPuts  int
		wantErr   []bool
	}{
		{"equal images are stored once",
			nil, []images.Inline{{B64: small}, {B64: other}, {B64: small}},
			false, false, []string{images.Name(small), images.Name(other), images.Name(small)}, 2, nil},
		{"a restored image keeps its stored name",
			[]string{wide}, []images.Inline{{B64: restored, Named: images.Name(wide)}},
			false, false, []string{images.Name(wide)}, 0, nil},
		{"a name the store does not hold is ignored",
			nil, []images.Inline{{B64: small, Named: images.Name(other)}},
			false, false, []string{images.Name(small)}, 1, nil},
		{"a name of other bytes is ignored",
			[]string{other}, []images.Inline{{B64: small, Named: images.Name(other)}},
			false, false, []string{images.Name(small)}, 1, nil},
		{"a name of other bytes of the same size is ignored",
			[]string{b64(small64)}, []images.Inline{{B64: twin, Named: images.Name(b64(small64))}},
			false, false, []string{images.Name(twin)}, 1, nil},
		{"the stored bytes in other base64 keep their name",
			[]string{b64(small64)}, []images.Inline{{B64: wrapped, Named: images.Name(b64(small64))}},
			false, false, []string{images.Name(b64(small64))}, 0, nil},
		{"a name that cannot be one is ignored",
			nil, []images.Inline{{B64: small, Named: "../x"}},
			false, false, []string{images.Name(small)}, 1, nil},
		{"not knowing whether the name is stored stores nothing",
			[]string{small}, []images.Inline{{B64: small, Named: images.Name(small)}},
			true, false, []string{""}, 0, []bool{true}},
		{"a failed put is that image's error",
			nil, []images.Inline{{B64: small}, {B64: other}},
			false, true, []string{"", ""}, 0, []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blobs := storefake.NewBlobs()
			s := images.New(blobs)
			for _, b := range tt.stored {
				if _, err := s.Put(t.Context(), "acme", b); err != nil {
					t.Fatal(err)
				}
			}
			before := blobs.Puts()
			incoming, err := images.Prepare(context.Background(), tt.imgs)
			if err != nil {
				t.Fatal(err)
			}
			got := incoming.Store(t.Context(), failingWriter{s, tt.failHead, tt.failPut}, "acme")
			if len(got) != len(tt.imgs) {
				t.Fatalf("%d results for %d images", len(got), len(tt.imgs))
			}
			for i, g := range got {
				wantErr := tt.wantErr != nil && tt.wantErr[i]
				if g.Name != tt.wantNames[i] || (g.Err != nil) != wantErr {
					t.Errorf("image %d: name %q err %v, want %q (error %v)", i, g.Name, g.Err, tt.wantNames[i], wantErr)
				}
				if wantErr && !errors.Is(g.Err, store.ErrUnavailable) {
					t.Errorf("image %d: %v is not an outage", i, g.Err)
				}
			}
			if puts := blobs.Puts() - before; puts != tt.wantPuts {
				t.Errorf("%d puts, want %d", puts, tt.wantPuts)
			}
		})
	}
}

// grayImage is a 16x16 image of one gray.
func grayImage(g uint8) image.Image {
	img := image.NewGray(image.Rect(0, 0, 16, 16))
	for i := range img.Pix {
		img.Pix[i] = g
	}
	return img
}

// sameSizeOther returns a PNG of other pixels whose file has data's length.
func sameSizeOther(t *testing.T, data []byte) []byte {
	t.Helper()
	for g := range 256 {
		other := pngBytes(t, grayImage(uint8(g)))
		if len(other) == len(data) && !bytes.Equal(other, data) {
			return other
		}
	}
	t.Fatal("no gray PNG has the length of the other")
	return nil
}

func TestPrepareNamesTheFirstRefusedImage(t *testing.T) {
	good := b64(pngBytes(t, gradient(8, 8)))
	imgs := []images.Inline{{B64: good, Field: "images[0]"}, {B64: "not base64!", Field: "images[1]"}, {B64: good, Field: "images[2]"}, {B64: b64([]byte("BM")), Field: "images[3]"}}
	_, err := images.Prepare(context.Background(), imgs)
	refused, ok := errors.AsType[*fault.Error](err)
	if !ok || refused.Code != fault.BadRequest || refused.Field != "images[1]" || !errors.Is(err, images.ErrInvalidBase64) {
		t.Fatalf("err %v, want images[1] refused as invalid base64", err)
	}
}

func TestARequestOfMoreDistinctImagesThanItMayCarryIsRefusedBeforeAnyDecode(t *testing.T) {
	small := b64(pngBytes(t, gradient(16, 16)))
	tests := []struct {
		name      string
		distinct  int
		repeats   int // of one image, which count once
		wantIndex int // -1: accepted
	}{
		{"the limit, one image repeated", images.MaxRequestImages - 1, 50, -1},
		{"one past the limit", images.MaxRequestImages + 1, 0, images.MaxRequestImages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []images.Inline
			field := func() string { return fmt.Sprintf("images[%d]", len(in)) }
			for range tt.repeats {
				in = append(in, images.Inline{B64: small, Field: field()})
			}
			for i := range tt.distinct {
				// Not images at all: a refusal by count reads none of them.
				in = append(in, images.Inline{B64: fmt.Sprintf("not-an-image-%d", i), Field: field()})
			}
			_, err := images.Prepare(context.Background(), in)
			refused, ok := errors.AsType[*fault.Error](err)
			if tt.wantIndex < 0 {
				if ok && errors.Is(err, images.ErrTooMany) {
					t.Fatalf("refused by count: %v", err)
				}
				return
			}
			if want := fmt.Sprintf("images[%d]", tt.repeats+tt.wantIndex); !ok || refused.Field != want || !errors.Is(err, images.ErrTooMany) {
				t.Fatalf("Prepare = %v, want image %d refused as one too many", err, tt.repeats+tt.wantIndex)
			}
		})
	}
}

// TestAStoredNameIsTheImageOfOnlyItsOwnBytes: Names tells whether b64 is
// the image a name means, for a caller that leaves an image to its name.
func TestAStoredNameIsTheImageOfOnlyItsOwnBytes(t *testing.T) {
	stored := pngBytes(t, grayImage(64))
	name := images.Name(b64(stored))
	tests := []struct {
		name string
		b64  string
		want bool
	}{
		{"the name of the base64 itself", b64(stored), true},
		{"the stored bytes in other base64", b64(stored)[:20] + "\n" + b64(stored)[20:], true},
		{"other bytes of the same size", b64(sameSizeOther(t, stored)), false},
		{"other bytes", b64(pngBytes(t, gradient(8, 8))), false},
		{"not base64", "not base64!", false},
	}
	s := images.New(storefake.NewBlobs())
	if _, err := s.Put(t.Context(), "acme", b64(stored)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := s.Names(t.Context(), "acme", name, tt.b64); err != nil || got != tt.want {
				t.Fatalf("Names = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if got, _ := s.Names(t.Context(), "other", name, b64(stored)[:20]+"\n"+b64(stored)[20:]); got {
		t.Fatal("another tenant's name was taken for bytes it does not hold")
	}
}
