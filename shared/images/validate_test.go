package images_test

import (
	"errors"
	"testing"

	"github.com/durachat/durachat/shared/images"
)

func TestValidateRefusesWhatPutRefuses(t *testing.T) {
	small := pngBytes(t, gradient(8, 8))
	cases := []struct {
		name string
		b64  string
		mime string
		want error
	}{
		{"small PNG", b64(small), images.PNG, nil},
		{"JPEG", b64(jpegBytes(t, gradient(8, 8))), images.JPEG, nil},
		{"invalid base64", "not*base64!", "", images.ErrInvalidBase64},
		{"not an image", b64([]byte("plain text, no image here")), "", images.ErrUnsupported},
		{"declared size past the decode limit", b64(withDeclaredSize(t, small, 30000, 30000)), "", images.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mime, size, err := images.Validate(c.b64)
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if c.want != nil {
				return
			}
			data, _ := images.Decode(c.b64)
			if mime != c.mime || size != len(data) {
				t.Fatalf("got %s %d, want %s %d", mime, size, c.mime, len(data))
			}
			if _, err := images.Shrink(c.b64); err != nil {
				t.Fatalf("Validate accepted what Shrink refuses: %v", err)
			}
		})
	}
}
