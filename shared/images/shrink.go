package images

import (
	"bytes"
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

// Decompression bomb guard: a small file can declare a huge canvas, and
// decoding allocates for the declared size (up to 8 bytes a pixel for 16-bit
// PNG). These limits are checked on the header, before anything is decoded.
const (
	maxDecodePixels = 50_000_000
	maxDecodeSide   = 20_000
)

// Prepared is an image ready to be stored.
type Prepared struct {
	Name     string // Name of the base64 text as received
	MimeType string // detected from the bytes
	Data     []byte // the bytes to store
	B64      string // base64 of Data: the input itself unless Shrunk
	Shrunk   bool   // re-encoded as JPEG
}

// Shrink prepares an image for storage. An image within MaxSide on both
// sides whose bytes take at most MaxBase64 characters as standard base64
// (the form it is sent to models in) is kept byte for byte. A larger one is
// scaled to fit MaxSide and re-encoded as JPEG (quality 85); when that is
// still too long, it is scaled down further until it fits. An animated GIF
// keeps its first frame.
func Shrink(b64 string) (Prepared, error) {
	data, err := Decode(b64)
	if err != nil {
		return Prepared{}, err
	}
	mimeType, cfg, err := detect(data)
	if err != nil {
		return Prepared{}, err
	}
	p := Prepared{Name: Name(b64), MimeType: mimeType, Data: data, B64: b64}
	if !mustShrink(cfg, len(data)) {
		return p, nil
	}
	img, err := decode(data, cfg)
	if err != nil {
		return Prepared{}, err
	}
	side := min(max(cfg.Width, cfg.Height), MaxSide)
	for {
		out, err := encodeJPEG(flatten(fit(img, side)))
		if err != nil {
			return Prepared{}, err
		}
		n := base64.StdEncoding.EncodedLen(len(out))
		if n <= MaxBase64 || side == 1 {
			p.MimeType, p.Data, p.B64, p.Shrunk = JPEG, out, base64.StdEncoding.EncodeToString(out), true
			return p, nil
		}
		// JPEG size grows about with the pixel count; aim a little under.
		side = max(1, min(side*9/10, int(float64(side)*math.Sqrt(float64(MaxBase64)/float64(n))*0.95)))
	}
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
	img, err := decode(data, cfg)
	if err != nil {
		return "", nil, err
	}
	small := fit(img, maxSide)
	if !opaque(img) {
		var buf bytes.Buffer
		if err := png.Encode(&buf, small); err != nil {
			return "", nil, fmt.Errorf("images: encode PNG: %w", err)
		}
		return PNG, buf.Bytes(), nil
	}
	out, err = encodeJPEG(small)
	if err != nil {
		return "", nil, err
	}
	return JPEG, out, nil
}

// decode decodes a detected image after checking its declared size.
func decode(data []byte, cfg image.Config) (image.Image, error) {
	if err := checkDecodable(cfg); err != nil {
		return nil, err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, &FormatError{Kind: KindUnsupported, Detail: "image data does not decode", Err: err}
	}
	return img, nil
}

// checkDecodable refuses a declared size past the decompression bomb guard.
func checkDecodable(cfg image.Config) error {
	if cfg.Width > maxDecodeSide || cfg.Height > maxDecodeSide || int64(cfg.Width)*int64(cfg.Height) > maxDecodePixels {
		return &FormatError{Kind: KindTooLarge, Detail: fmt.Sprintf("%dx%d pixels declared, limit %d px a side and %d megapixels",
			cfg.Width, cfg.Height, maxDecodeSide, maxDecodePixels/1_000_000)}
	}
	return nil
}

// fit scales img so its long side is at most side, keeping the aspect
// ratio; an image already within it is returned as is.
func fit(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if max(w, h) <= side {
		return img
	}
	scale := float64(side) / float64(max(w, h))
	w = max(1, int(math.Round(float64(w)*scale)))
	h = max(1, int(math.Round(float64(h)*scale)))
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	return dst
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
