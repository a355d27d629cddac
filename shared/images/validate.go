package images

import (
	"encoding/base64"
	"fmt"
)

// Validate checks b64 the way Put will, without decoding any pixels: it is
// base64, its bytes have a PNG, JPEG, GIF or WebP header, and when Put would
// have to shrink it, its declared size is one durachat will decode. It
// returns the detected MIME type and the number of decoded bytes.
//
// A caller storing several images checks them all first, so bad input is
// refused before anything is stored.
func Validate(b64 string) (mimeType string, size int, err error) {
	data, err := Decode(b64)
	if err != nil {
		return "", 0, err
	}
	mimeType, cfg, err := detect(data)
	if err != nil {
		return "", 0, err
	}
	mustShrink := max(cfg.Width, cfg.Height) > MaxSide || base64.StdEncoding.EncodedLen(len(data)) > MaxBase64
	// The same limits decode applies, checked here on the header alone.
	if mustShrink && (cfg.Width > maxDecodeSide || cfg.Height > maxDecodeSide || cfg.Width*cfg.Height > maxDecodePixels) {
		return "", 0, &FormatError{Kind: KindTooLarge, Detail: fmt.Sprintf("%dx%d pixels declared, limit %d px a side and %d megapixels",
			cfg.Width, cfg.Height, maxDecodeSide, maxDecodePixels/1_000_000)}
	}
	return mimeType, len(data), nil
}
