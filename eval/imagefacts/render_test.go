package imagefacts

import (
	"bytes"
	"context"
	"encoding/base64"
	"image/color"
	"image/png"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
)

func TestEachImageCarriesItsFactAndIsTheSameEveryTime(t *testing.T) {
	for _, f := range Catalog() {
		t.Run(string(f.Kind), func(t *testing.T) {
			a, err := Render(f)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Render(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Error("two renders differ")
			}
			got, err := ReadText(a, TextKeyword)
			if err != nil || got != f.Fact {
				t.Errorf("fact = %q, %v; want %q", got, err, f.Fact)
			}
		})
	}
}

// A real model reads the drawing, not the chunk: each image must have
// drawn content, in more than a couple of colours.
func TestEachImageHasDrawnContent(t *testing.T) {
	for _, f := range Catalog() {
		data, err := Render(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.Kind, err)
		}
		colours := map[color.RGBA]int{}
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				colours[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
			}
		}
		var background int
		for _, n := range colours {
			background = max(background, n)
		}
		drawn := b.Dx()*b.Dy() - background
		if len(colours) < 3 || drawn < b.Dx()*b.Dy()/50 {
			t.Errorf("%s: %d colours, %d pixels off the background: too little drawn", f.Kind, len(colours), drawn)
		}
	}
}

// The scripted model reads the fact from the tEXt chunk, which survives
// only if the bytes reach it unchanged: the images are small enough that
// storing (images.Shrink) and sending (images.Downscale to the
// compactor's side) both keep them byte for byte.
func TestImagesReachTheModelByteForByte(t *testing.T) {
	for _, f := range Catalog() {
		data, err := Render(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if max(cfg.Width, cfg.Height) > compactor.ImageSide {
			t.Errorf("%s: %dx%d, over the compactor's %d px", f.Kind, cfg.Width, cfg.Height, compactor.ImageSide)
		}
		p, err := images.Shrink(context.Background(), base64.StdEncoding.EncodeToString(data))
		if err != nil {
			t.Fatal(err)
		}
		if p.Shrunk || !bytes.Equal(p.Data, data) {
			t.Errorf("%s: storing changed the bytes", f.Kind)
		}
		mimeType, out, err := images.Downscale(p.Data, compactor.ImageSide)
		if err != nil {
			t.Fatal(err)
		}
		if mimeType != images.PNG || !bytes.Equal(out, data) {
			t.Errorf("%s: downscaling for the compactor changed the bytes (%s)", f.Kind, mimeType)
		}
	}
}

func TestRenderRefusesAnUnknownKind(t *testing.T) {
	if _, err := Render(Fact{Kind: "poster", Fact: "x"}); err == nil {
		t.Error("an unknown kind rendered")
	}
}
