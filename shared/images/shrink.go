package images

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"

	"golang.org/x/image/draw"
)

// Limits of stored images (SPEC requirement 3).
const (
	// MaxSide is the longest side a stored image keeps.
	MaxSide = 2048
	// MaxBase64 is the most base64 characters a stored image takes.
	MaxBase64 = 2 * 1024 * 1024
	// JPEGQuality is used for every re-encode.
	JPEGQuality = 85
)

// Decompression bomb guard on the declared size, checked on the header
// before anything is decoded. It bounds the time a decode and a scale take;
// their memory is bounded by the decode budget (Budget).
const (
	maxDecodePixels = 50_000_000
	maxDecodeSide   = 20_000
)

// Prepared is an image ready to be stored.
type Prepared struct {
	Name     string // Name of the base64 text as received
	MimeType string // detected from the bytes
	Data     []byte // the bytes to store
	// B64 is the base64 of Data: the input itself unless Shrunk; empty
	// for an image ShrinkBytes keeps as it is.
	B64    string
	Shrunk bool // re-encoded as JPEG
}

// Shrink prepares an image for storage. Its bytes must pass Validate: a
// whole image of an accepted format, decoded within the decode budget. An
// image within MaxSide on both sides whose bytes take at most MaxBase64
// characters as standard base64 (the form it is sent to models in) is kept
// byte for byte. A larger one is scaled to fit MaxSide and re-encoded as
// JPEG (quality 85); when that is still too long, it is scaled down further
// until it fits. An animated GIF keeps its first frame.
func Shrink(ctx context.Context, b64 string) (Prepared, error) {
	data, err := Decode(b64)
	if err != nil {
		return Prepared{}, err
	}
	return prepare(ctx, Prepared{Name: Name(b64), Data: data, B64: b64})
}

// ShrinkBytes is Shrink of image bytes that came without base64 (an
// upload), named as their standard base64 would be (NameBytes) without
// making it.
func ShrinkBytes(ctx context.Context, data []byte) (Prepared, error) {
	return prepare(ctx, Prepared{Name: NameBytes(data), Data: data})
}

// prepare checks p.Data and shrinks it when it must be (Shrink).
func prepare(ctx context.Context, p Prepared) (Prepared, error) {
	data := p.Data
	mimeType, cfg, err := detect(data)
	if err != nil {
		return Prepared{}, err
	}
	p.MimeType = mimeType
	if !mustShrink(cfg, len(data)) {
		return p, detected{data, mimeType, cfg}.decodeWithin(ctx, 0, func(image.Image) error { return nil })
	}
	side := min(max(cfg.Width, cfg.Height), MaxSide)
	err = detected{data, mimeType, cfg}.decodeWithin(ctx, side, func(img image.Image) error {
		for {
			out, err := encodeJPEG(flatten(fit(img, side)))
			if err != nil {
				return err
			}
			n := base64.StdEncoding.EncodedLen(len(out))
			if n <= MaxBase64 || side == 1 {
				p.MimeType, p.Data, p.B64, p.Shrunk = JPEG, out, base64.StdEncoding.EncodeToString(out), true
				return nil
			}
			// JPEG size grows about with the pixel count; aim a little under.
			side = max(1, min(side*9/10, int(float64(side)*math.Sqrt(float64(MaxBase64)/float64(n))*0.95)))
		}
	})
	if err != nil {
		return Prepared{}, err
	}
	return p, nil
}

// mustShrink reports whether an image of n bytes breaks a storage limit.
func mustShrink(cfg image.Config, n int) bool {
	return max(cfg.Width, cfg.Height) > MaxSide || base64.StdEncoding.EncodedLen(n) > MaxBase64
}

// Downscale returns an image at most maxSide pixels on its long side, for
// the compactor. An image already within it is returned unchanged. A scaled
// image is JPEG (quality 85), or PNG when it has transparency; a scaled WebP
// becomes one of those too, as there is no WebP encoder in pure Go.
func Downscale(data []byte, maxSide int) (mimeType string, out []byte, err error) {
	if maxSide < 1 {
		return "", nil, fmt.Errorf("images: downscale to %d px: side must be positive", maxSide)
	}
	mimeType, cfg, err := detect(data)
	if err != nil {
		return "", nil, err
	}
	if max(cfg.Width, cfg.Height) <= maxSide {
		return mimeType, data, nil
	}
	err = detected{data, mimeType, cfg}.decodeWithin(context.Background(), maxSide, func(img image.Image) error {
		small := fit(img, maxSide)
		if !opaque(img) {
			var buf bytes.Buffer
			if err := png.Encode(&buf, small); err != nil {
				return fmt.Errorf("images: encode PNG: %w", err)
			}
			mimeType, out = PNG, buf.Bytes()
			return nil
		}
		mimeType = JPEG
		out, err = encodeJPEG(small)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return mimeType, out, nil
}

// checkDecodable refuses a declared size past the decompression bomb guard.
func checkDecodable(cfg image.Config) error {
	if cfg.Width > maxDecodeSide || cfg.Height > maxDecodeSide || int64(cfg.Width)*int64(cfg.Height) > maxDecodePixels {
		return badImage(ErrTooLarge, fmt.Sprintf("%dx%d pixels declared, limit %d px a side and %d megapixels",
			cfg.Width, cfg.Height, maxDecodeSide, maxDecodePixels/1_000_000), nil)
	}
	return nil
}

// fit scales img so its long side is at most side, keeping the aspect
// ratio (scale); an image already within it is returned as is.
func fit(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := fitSize(b.Dx(), b.Dy(), side)
	if w == b.Dx() && h == b.Dy() {
		return img
	}
	return scale(img, w, h)
}

// flatten lays a transparent image over white: JPEG has no alpha, and
// transparent pixels would otherwise turn black.
func flatten(img image.Image) image.Image {
	if opaque(img) {
		return img
	}
	b := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(dst, dst.Bounds(), img, b.Min, draw.Over)
	return dst
}

// opaque reports whether every pixel is fully opaque. The decoders' image
// types all answer it; an image that cannot is assumed to have alpha.
func opaque(img image.Image) bool {
	o, ok := img.(interface{ Opaque() bool })
	return ok && o.Opaque()
}

func encodeJPEG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: JPEGQuality}); err != nil {
		return nil, fmt.Errorf("images: encode JPEG: %w", err)
	}
	return buf.Bytes(), nil
}
