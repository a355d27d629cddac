// Package images holds durachat's image rules: an image's name, which bytes
// count as an image, when an image is shrunk before it is stored, the smaller
// copy the compactor sends to a model, the per-tenant image store, and the
// Incoming through which every route that takes inline images stores them.
//
// The caller's MIME type is never trusted: the format is read from the bytes.
package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"strings"

	// Decoders for the accepted formats, registered with package image.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// MIME types of the accepted formats.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// Errors callers branch on (errors.Is). They are distinct from the store's
// errors: they mean the input is wrong, not that a store failed.
var (
	// ErrInvalidBase64: the text is not base64.
	ErrInvalidBase64 = errors.New("invalid base64")
	// ErrUnsupported: the bytes are not a PNG, JPEG, GIF or WebP image.
	ErrUnsupported = errors.New("unsupported image")
	// ErrTooLarge: the image declares more pixels than durachat will decode.
	ErrTooLarge = errors.New("image too large")
)

// badImage says what is wrong with an image: sentinel (one of the three
// above), what was seen (detail, or ""), and the decoder's error (cause,
// or nil). errors.Is matches the sentinel, and the cause when there is one.
func badImage(sentinel error, detail string, cause error) error {
	format, args := "image: %w", []any{sentinel}
	if detail != "" {
		format, args = format+": %s", append(args, detail)
	}
	if cause != nil {
		format, args = format+": %w", append(args, cause)
	}
	return fmt.Errorf(format, args...)
}

// malformed reports whether err is what badImage returns.
func malformed(err error) bool {
	return errors.Is(err, ErrInvalidBase64) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge)
}

// Name is the image's name: the first 16 lowercase hex digits of the SHA-256
// of its base64 text exactly as received, so the same paste always gets the
// same name.
func Name(b64 string) string {
	// Hashed through a small buffer: sha256.Sum256([]byte(b64)) would copy
	// the whole text, megabytes for a screenshot.
	h := sha256.New()
	var chunk [4 << 10]byte
	for len(b64) > 0 {
		n := copy(chunk[:], b64)
		h.Write(chunk[:n])
		b64 = b64[n:]
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// NameBytes is the Name of data's standard base64, the name the image gets
// inline, computed without holding the base64 (a third more than data).
func NameBytes(data []byte) string {
	h := sha256.New()
	enc := base64.NewEncoder(base64.StdEncoding, h)
	_, _ = enc.Write(data) // a hash does not fail
	_ = enc.Close()
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Decode returns the bytes of base64 text. Standard base64 with padding is
// the canonical form; unpadded and URL-safe base64 are accepted too, since
// the bytes, not the text, are what is stored. ASCII whitespace (line
// breaks of wrapped base64, stray spaces) is ignored. Anything else is a
// an error matching ErrInvalidBase64.
func Decode(b64 string) ([]byte, error) {
	text := stripSpace(b64)
	enc := base64.StdEncoding
	if strings.IndexByte(text, '-') >= 0 || strings.IndexByte(text, '_') >= 0 {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(text, "=") {
		enc = enc.WithPadding(base64.NoPadding)
	}
	data, err := enc.DecodeString(text)
	if err != nil {
		return nil, badImage(ErrInvalidBase64, "", err)
	}
	return data, nil
}

// stripSpace drops ASCII whitespace, copying only when there is some. It
// looks at each byte in a plain loop, not through a function per byte:
// base64 text runs to megabytes, and nearly all of it has no whitespace.
func stripSpace(s string) string {
	i := 0
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	out.WriteString(s[:i])
	for ; i < len(s); i++ {
		if !isSpace(s[i]) {
			out.WriteByte(s[i])
		}
	}
	return out.String()
}

func isSpace(c byte) bool {
	return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
}

// Detect returns the MIME type of an image read from its bytes: PNG, JPEG,
// GIF or WebP, with a header that decodes as that format. Anything else is a
// an error matching ErrUnsupported that names what was seen.
func Detect(data []byte) (mimeType string, err error) {
	mimeType, _, err = detect(data)
	return mimeType, err
}

// detect is Detect that also returns the header's dimensions.
func detect(data []byte) (string, image.Config, error) {
	mimeType := sniff(data)
	if mimeType == "" {
		return "", image.Config{}, badImage(ErrUnsupported, describe(data), nil)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", cfg, badImage(ErrUnsupported, "bytes start like "+formatName(mimeType)+" but its header does not decode", err)
	}
	if "image/"+format != mimeType {
		return "", cfg, badImage(ErrUnsupported, fmt.Sprintf("bytes start like %s but decode as %s", formatName(mimeType), format), nil)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return "", cfg, badImage(ErrUnsupported, fmt.Sprintf("%s of %dx%d pixels", formatName(mimeType), cfg.Width, cfg.Height), nil)
	}
	return mimeType, cfg, nil
}

// sniff matches the magic bytes of the accepted formats.
func sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return JPEG
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return GIF
	case len(b) >= 16 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP" && string(b[12:15]) == "VP8":
		return WebP
	}
	return ""
}

func formatName(mimeType string) string {
	switch mimeType {
	case PNG:
		return "PNG"
	case JPEG:
		return "JPEG"
	case GIF:
		return "GIF"
	case WebP:
		return "WebP"
	}
	return mimeType
}

// describe names refused bytes: a well-known format when its magic shows,
// else the first bytes themselves.
func describe(b []byte) string {
	if len(b) == 0 {
		return "no bytes"
	}
	known := []struct{ prefix, name string }{
		{"BM", "BMP"},
		{"II*\x00", "TIFF"},
		{"MM\x00*", "TIFF"},
		{"%PDF", "PDF"},
		{"<svg", "SVG"},
		{"<?xml", "XML"},
		{"\x00\x00\x01\x00", "ICO"},
		{"8BPS", "PSD"},
		{"\xff\x0a", "JPEG XL"},
		{"\x00\x00\x00\x0cJXL ", "JPEG XL"},
		{"PK\x03\x04", "ZIP"},
		{"\x1f\x8b", "gzip"},
	}
	for _, k := range known {
		if bytes.HasPrefix(b, []byte(k.prefix)) {
			return k.name + " (want PNG, JPEG, GIF or WebP)"
		}
	}
	if len(b) >= 12 && string(b[4:8]) == "ftyp" {
		return fmt.Sprintf("ISO media %q, such as HEIC or AVIF (want PNG, JPEG, GIF or WebP)", b[8:12])
	}
	head := b
	if len(head) > 12 {
		head = head[:12]
	}
	return fmt.Sprintf("bytes start %q (want PNG, JPEG, GIF or WebP)", head)
}
