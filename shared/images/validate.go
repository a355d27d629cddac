package images

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
	if mustShrink(cfg, len(data)) {
		if err := checkDecodable(cfg); err != nil {
			return "", 0, err
		}
	}
	return mimeType, len(data), nil
}
