package imagefacts

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"testing"
)

func plainPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTextChunkRoundTripsAndTheImageStillDecodes(t *testing.T) {
	data, err := WithText(plainPNG(t), "fact", "error code E4471 in payment-service")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadText(data, "fact")
	if err != nil || got != "error code E4471 in payment-service" {
		t.Fatalf("ReadText = %q, %v", got, err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the PNG with a text chunk does not decode: %v", err)
	}
	if got := color.RGBAModel.Convert(img.At(1, 1)); got != (color.RGBA{200, 10, 10, 255}) {
		t.Errorf("pixel (1, 1) = %v after adding the chunk", got)
	}
}

func TestReadTextRefusesWhatIsNotThere(t *testing.T) {
	withFact, err := WithText(plainPNG(t), "fact", "x")
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(withFact)
	damaged[33+8+2] ^= 0xff // a byte of the tEXt chunk's keyword, after IHDR
	tests := []struct {
		name    string
		data    []byte
		keyword string
		noText  bool // ErrNoText rather than a damaged-data error
	}{
		{"no text chunk", plainPNG(t), "fact", true},
		{"another keyword", withFact, "Title", true},
		{"not a PNG", []byte("GIF89a......"), "fact", false},
		{"damaged chunk", damaged, "fact", false},
		{"truncated", withFact[:40], "fact", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadText(tt.data, tt.keyword)
			if err == nil {
				t.Fatalf("ReadText = %q, want an error", got)
			}
			if errors.Is(err, ErrNoText) != tt.noText {
				t.Errorf("err = %v; ErrNoText %v, want %v", err, errors.Is(err, ErrNoText), tt.noText)
			}
		})
	}
}

func TestWithTextRefusesKeywordsThePNGSpecForbids(t *testing.T) {
	for _, kw := range []string{"", string(make([]byte, 80)), "a\x00b"} {
		if _, err := WithText(plainPNG(t), kw, "text"); err == nil {
			t.Errorf("keyword %q accepted", kw)
		}
	}
	if _, err := WithText(plainPNG(t), "fact", "a\x00b"); err == nil {
		t.Error("text with a NUL accepted")
	}
}

func FuzzReadText(f *testing.F) {
	data, err := WithText(plainPNG(f), "fact", "total $1284.50")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(pngSignature))
	f.Add([]byte(pngSignature + "\xff\xff\xff\xffIHDR"))
	f.Fuzz(func(t *testing.T, data []byte) {
		text, err := ReadText(data, "fact")
		if err != nil {
			return
		}
		// Whatever was read can be written into a fresh PNG and read back.
		again, err := WithText(plainPNG(t), "fact", text)
		if err != nil {
			return // a NUL-free text is required to write; reading has no such rule
		}
		if got, err := ReadText(again, "fact"); err != nil || got != text {
			t.Fatalf("round trip of %q gave %q, %v", text, got, err)
		}
	})
}
