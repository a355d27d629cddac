package images_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
)

// The WebP files in testdata were made with cwebp from generated gradients:
// small.webp 64x48 lossy, wide.webp 1200x600 lossy, alpha.webp 1000x500
// lossless with its left half transparent.
func webpFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// gradient is an opaque image with smooth colour, like a screenshot.
func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), 90, 255})
		}
	}
	return img
}

// noise is an opaque image that compresses badly in any format.
func noise(w, h int) *image.NRGBA {
	r := rand.New(rand.NewPCG(1, 2))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.Uint32())
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	return img
}

// halfTransparent has its left half fully transparent.
func halfTransparent(w, h int) *image.NRGBA {
	img := gradient(w, h)
	for y := range h {
		for x := range w / 2 {
			img.SetNRGBA(x, y, color.NRGBA{})
		}
	}
	return img
}

func pngBytes(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegBytes(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gifBytes(t testing.TB, frames ...image.Image) []byte {
	t.Helper()
	g := &gif.GIF{}
	for _, f := range frames {
		p := image.NewPaletted(f.Bounds(), palette.Plan9)
		for y := f.Bounds().Min.Y; y < f.Bounds().Max.Y; y++ {
			for x := f.Bounds().Min.X; x < f.Bounds().Max.X; x++ {
				p.Set(x, y, f.At(x, y))
			}
		}
		g.Image = append(g.Image, p)
		g.Delay = append(g.Delay, 10)
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// withDeclaredSize rewrites a PNG's header to claim w x h pixels, the way a
// decompression bomb does.
func withDeclaredSize(t testing.TB, pngData []byte, w, h uint32) []byte {
	t.Helper()
	out := bytes.Clone(pngData)
	ihdr := out[8+4 : 8+4+4+13] // chunk type and data
	if string(ihdr[:4]) != "IHDR" {
		t.Fatal("not a PNG header")
	}
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	binary.BigEndian.PutUint32(out[8+4+4+13:], crc32.ChecksumIEEE(ihdr))
	return out
}

func config(t testing.TB, data []byte) image.Config {
	t.Helper()
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestNameIsOfTheBase64AsReceived(t *testing.T) {
	data := pngBytes(t, gradient(10, 10))
	std := b64(data)
	wrapped := std[:20] + "\n" + std[20:]
	// A long text is hashed in pieces; the name is still of the whole text.
	long := strings.Repeat(std, 50) + "tail"
	for _, text := range []string{std, wrapped, strings.TrimRight(std, "="), long, ""} {
		sum := sha256.Sum256([]byte(text))
		want := hex.EncodeToString(sum[:])[:16]
		got := images.Name(text)
		if got != want || !refs.ValidName(got) {
			t.Errorf("Name(%.12q...) = %q, want %q (16 lowercase hex digits)", text, got, want)
		}
	}
	if images.Name(std) == images.Name(wrapped) {
		t.Error("two texts of the same bytes got one name; the name must be of the text as received")
	}
	p, err := images.Shrink(context.Background(), wrapped)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != images.Name(wrapped) {
		t.Errorf("Prepared.Name = %q, want Name of the input %q", p.Name, images.Name(wrapped))
	}
}

func TestDecodeAcceptsStandardAndForgivingVariants(t *testing.T) {
	data := []byte("\xfb\xff\xfe any bytes at all, with both 62 and 63 in them \xff")
	std := base64.StdEncoding.EncodeToString(data)
	tests := []struct{ name, text string }{
		{"standard padded", std},
		{"standard unpadded", base64.RawStdEncoding.EncodeToString(data)},
		{"url-safe padded", base64.URLEncoding.EncodeToString(data)},
		{"url-safe unpadded", base64.RawURLEncoding.EncodeToString(data)},
		{"wrapped at 20 with LF", std[:20] + "\n" + std[20:40] + "\n" + std[40:]},
		{"wrapped with CRLF and trailing newline", std[:20] + "\r\n" + std[20:] + "\r\n"},
		{"spaces and tabs", " " + std[:8] + " \t" + std[8:] + " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := images.Decode(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("Decode = %q, want %q", got, data)
			}
		})
	}
}

func TestInvalidBase64IsATypedError(t *testing.T) {
	tests := []struct{ name, text string }{
		{"not base64 at all", "!!!!"},
		{"wrong padding", "QQ="},
		{"too much padding", "QQ==="},
		{"padding in the middle", "QQ==QUJD"},
		{"both alphabets", "ab+c-d__"},
		{"one dangling character", "QUJDR"},
		{"a data URL prefix", "data:image/png;base64,iVBORw0KGgo="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := images.Decode(tt.text)
			if !errors.Is(err, images.ErrInvalidBase64) {
				t.Fatalf("Decode(%q) error = %v, want ErrInvalidBase64", tt.text, err)
			}
			if errors.Is(err, images.ErrUnsupported) {
				t.Errorf("error %v also claims ErrUnsupported", err)
			}
			if _, err := images.Shrink(context.Background(), tt.text); !errors.Is(err, images.ErrInvalidBase64) {
				t.Errorf("Shrink error = %v, want ErrInvalidBase64", err)
			}
		})
	}
}

func TestDetectReadsTheFormatFromTheBytes(t *testing.T) {
	img := gradient(30, 20)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"PNG", pngBytes(t, img), images.PNG},
		{"JPEG", jpegBytes(t, img), images.JPEG},
		{"GIF", gifBytes(t, img), images.GIF},
		{"WebP lossy", webpFile(t, "small.webp"), images.WebP},
		{"WebP lossless with alpha", webpFile(t, "alpha.webp"), images.WebP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := images.Detect(tt.data)
			if err != nil || got != tt.want {
				t.Errorf("Detect = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestDetectRefusesNonImages(t *testing.T) {
	pngData := pngBytes(t, gradient(4, 4))
	webp := webpFile(t, "small.webp")
	tests := []struct {
		name string
		data []byte
		says string // the message names what was seen
	}{
		{"no bytes", nil, "no bytes"},
		{"plain text", []byte("hello, this is not a picture"), `"hello, this "`},
		{"PDF", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"), "PDF"},
		{"BMP", []byte("BM\x36\x00\x0c\x00\x00\x00\x00\x00\x36\x00\x00\x00"), "BMP"},
		{"SVG", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), "SVG"},
		{"TIFF", []byte("II*\x00\x08\x00\x00\x00"), "TIFF"},
		{"HEIC", []byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00"), "heic"},
		{"PNG signature only", pngData[:8], "PNG"},
		{"PNG signature then garbage", append(bytes.Clone(pngData[:8]), "garbage garbage garbage"...), "PNG"},
		{"JPEG magic then garbage", []byte("\xff\xd8\xff\x00 not a real segment"), "JPEG"},
		{"GIF magic truncated", []byte("GIF89a\x01"), "GIF"},
		{"RIFF but WAVE", []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"), "RIFF"},
		{"WebP truncated", webp[:20], "WebP"},
		{"zero-width PNG", withDeclaredSize(t, pngData, 0, 4), "PNG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := images.Detect(tt.data)
			if !errors.Is(err, images.ErrUnsupported) {
				t.Fatalf("Detect = %q, %v; want ErrUnsupported", got, err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not name %q", err, tt.says)
			}
			if _, err := images.Shrink(context.Background(), b64(tt.data)); !errors.Is(err, images.ErrUnsupported) {
				t.Errorf("Shrink error = %v, want ErrUnsupported", err)
			}
			if _, _, err := images.Downscale(tt.data, 800); !errors.Is(err, images.ErrUnsupported) {
				t.Errorf("Downscale error = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestSmallImageStaysByteIdentical(t *testing.T) {
	std := b64(pngBytes(t, gradient(40, 30)))
	tests := []struct {
		name string
		text string
		mime string
	}{
		{"PNG", std, images.PNG},
		{"PNG sent wrapped", std[:30] + "\n" + std[30:], images.PNG},
		{"PNG sent unpadded", strings.TrimRight(std, "="), images.PNG},
		{"JPEG", b64(jpegBytes(t, gradient(300, 200))), images.JPEG},
		{"GIF", b64(gifBytes(t, gradient(30, 30))), images.GIF},
		{"WebP", b64(webpFile(t, "wide.webp")), images.WebP},
		{"2048 px exactly", b64(pngBytes(t, gradient(2048, 16))), images.PNG},
		{"noisy PNG just under 2 MiB", b64(pngBytes(t, noise(700, 500))), images.PNG},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := images.Shrink(context.Background(), tt.text)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := images.Decode(tt.text)
			if p.B64 != tt.text || !bytes.Equal(p.Data, data) || p.Shrunk {
				t.Errorf("Shrink changed the image: shrunk=%v, %d -> %d bytes", p.Shrunk, len(data), len(p.Data))
			}
			if p.MimeType != tt.mime || p.Name != images.Name(tt.text) {
				t.Errorf("got %s named %s, want %s named %s", p.MimeType, p.Name, tt.mime, images.Name(tt.text))
			}
		})
	}
}

// checkShrunk checks the shape every shrunk image has.
func checkShrunk(t *testing.T, input string, p images.Prepared) image.Config {
	t.Helper()
	if !p.Shrunk || p.MimeType != images.JPEG {
		t.Fatalf("got shrunk=%v %s, want a JPEG", p.Shrunk, p.MimeType)
	}
	if got, _ := images.Detect(p.Data); got != images.JPEG {
		t.Errorf("stored bytes are %q, not JPEG", got)
	}
	if p.B64 != b64(p.Data) {
		t.Error("B64 is not the standard base64 of Data")
	}
	if len(p.B64) > images.MaxBase64 {
		t.Errorf("base64 is %d characters, over %d", len(p.B64), images.MaxBase64)
	}
	if p.Name != images.Name(input) {
		t.Errorf("name %s, want the input's %s", p.Name, images.Name(input))
	}
	return config(t, p.Data)
}

func TestOversizeSideIsShrunkToJPEG(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		w, h int
	}{
		{"wide PNG", pngBytes(t, gradient(3000, 1000)), 2048, 683},
		{"tall JPEG", jpegBytes(t, gradient(1000, 4096)), 500, 2048},
		{"one pixel over", pngBytes(t, gradient(2049, 2049)), 2048, 2048},
		{"wide GIF", gifBytes(t, gradient(2100, 50)), 2048, 49},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := b64(tt.data)
			p, err := images.Shrink(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			cfg := checkShrunk(t, in, p)
			if cfg.Width != tt.w || cfg.Height != tt.h {
				t.Errorf("shrunk to %dx%d, want %dx%d", cfg.Width, cfg.Height, tt.w, tt.h)
			}
		})
	}
}

func TestTransparencyIsFlattenedOntoWhite(t *testing.T) {
	in := b64(pngBytes(t, halfTransparent(2400, 400)))
	p, err := images.Shrink(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkShrunk(t, in, p)
	img, err := jpeg.Decode(bytes.NewReader(p.Data))
	if err != nil {
		t.Fatal(err)
	}
	r, g, b, _ := img.At(100, 100).RGBA()
	if r>>8 < 245 || g>>8 < 245 || b>>8 < 245 {
		t.Errorf("transparent area became %d,%d,%d, want white", r>>8, g>>8, b>>8)
	}
}

func TestOverTwoMiBBase64IsReencoded(t *testing.T) {
	// A smooth 1400x1000 PNG stored without compression: about 5.6 MB of
	// base64 within 2048 px. A JPEG at full size is small enough, so the
	// image keeps its size.
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	if err := enc.Encode(&buf, gradient(1400, 1000)); err != nil {
		t.Fatal(err)
	}
	in := b64(buf.Bytes())
	if len(in) <= images.MaxBase64 {
		t.Fatalf("test image is only %d base64 characters", len(in))
	}
	p, err := images.Shrink(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := checkShrunk(t, in, p); cfg.Width != 1400 || cfg.Height != 1000 {
		t.Errorf("re-encoded at %dx%d, want the full 1400x1000", cfg.Width, cfg.Height)
	}
}

func TestShrinkScalesFurtherUntilUnderTwoMiB(t *testing.T) {
	// Noise does not compress: even JPEG 85 at 2048 px is over 2 MiB.
	in := b64(pngBytes(t, noise(2048, 2048)))
	p, err := images.Shrink(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkShrunk(t, in, p)
	if cfg.Width >= 2048 || cfg.Width != cfg.Height {
		t.Errorf("got %dx%d, want a square under 2048 px", cfg.Width, cfg.Height)
	}
	if len(p.B64) < images.MaxBase64/2 {
		t.Errorf("scaled much further than needed: %d base64 characters at %d px", len(p.B64), cfg.Width)
	}
}

func TestAnimatedGIFKeepsItsFirstFrame(t *testing.T) {
	red := image.NewUniform(color.RGBA{255, 0, 0, 255})
	blue := image.NewUniform(color.RGBA{0, 0, 255, 255})
	frame := func(c image.Image) image.Image {
		img := image.NewRGBA(image.Rect(0, 0, 2100, 60))
		for y := range 60 {
			for x := range 2100 {
				img.Set(x, y, c.At(x, y))
			}
		}
		return img
	}
	in := b64(gifBytes(t, frame(red), frame(blue)))
	p, err := images.Shrink(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkShrunk(t, in, p)
	img, err := jpeg.Decode(bytes.NewReader(p.Data))
	if err != nil {
		t.Fatal(err)
	}
	r, _, b, _ := img.At(1000, 30).RGBA()
	if r>>8 < 200 || b>>8 > 60 {
		t.Errorf("middle pixel is r=%d b=%d, want the first frame's red", r>>8, b>>8)
	}
}

func TestDecompressionBombIsRefusedBeforeDecoding(t *testing.T) {
	small := pngBytes(t, gradient(8, 8))
	tests := []struct {
		name string
		w, h uint32
	}{
		{"a side over 20000 px", 30000, 10},
		{"over 50 megapixels", 10000, 10000},
		{"a quarter-billion pixels a side", 1 << 28, 1 << 28},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bomb := withDeclaredSize(t, small, tt.w, tt.h)
			if _, err := images.Shrink(context.Background(), b64(bomb)); !errors.Is(err, images.ErrTooLarge) {
				t.Errorf("Shrink error = %v, want ErrTooLarge", err)
			}
			if _, _, err := images.Downscale(bomb, 800); !errors.Is(err, images.ErrTooLarge) {
				t.Errorf("Downscale error = %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestDownscaleTo800(t *testing.T) {
	smallJPEG := jpegBytes(t, gradient(800, 300))
	smallWebP := webpFile(t, "small.webp")
	tests := []struct {
		name     string
		data     []byte
		mime     string
		w, h     int
		same     bool // returned unchanged
		hasAlpha bool
	}{
		{"opaque PNG becomes JPEG", pngBytes(t, gradient(1600, 1200)), images.JPEG, 800, 600, false, false},
		{"transparent PNG stays PNG", pngBytes(t, halfTransparent(1000, 2000)), images.PNG, 400, 800, false, true},
		{"large JPEG", jpegBytes(t, gradient(3000, 3000)), images.JPEG, 800, 800, false, false},
		{"GIF", gifBytes(t, gradient(900, 100)), images.JPEG, 800, 89, false, false},
		{"JPEG of 800 px is unchanged", smallJPEG, images.JPEG, 800, 300, true, false},
		{"small WebP is unchanged", smallWebP, images.WebP, 64, 48, true, false},
		{"large WebP becomes JPEG", webpFile(t, "wide.webp"), images.JPEG, 800, 400, false, false},
		{"WebP with alpha becomes PNG", webpFile(t, "alpha.webp"), images.PNG, 800, 400, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mime, out, err := images.Downscale(tt.data, 800)
			if err != nil {
				t.Fatal(err)
			}
			if mime != tt.mime {
				t.Errorf("mime = %s, want %s", mime, tt.mime)
			}
			if detected, _ := images.Detect(out); detected != mime {
				t.Errorf("bytes are %q but reported as %s", detected, mime)
			}
			if tt.same != bytes.Equal(out, tt.data) {
				t.Errorf("returned unchanged = %v, want %v", !tt.same, tt.same)
			}
			img, _, err := image.Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != tt.w || b.Dy() != tt.h {
				t.Errorf("size %dx%d, want %dx%d", b.Dx(), b.Dy(), tt.w, tt.h)
			}
			if tt.hasAlpha {
				if _, _, _, a := img.At(10, 10).RGBA(); a != 0 {
					t.Errorf("transparent corner has alpha %d", a>>8)
				}
			}
		})
	}
}

func TestDownscaleRefusesANonPositiveSide(t *testing.T) {
	if _, _, err := images.Downscale(pngBytes(t, gradient(10, 10)), 0); err == nil {
		t.Error("Downscale to 0 px succeeded")
	}
}

func FuzzDetect(f *testing.F) {
	f.Add(pngBytes(f, gradient(3, 2)))
	f.Add(jpegBytes(f, gradient(3, 2)))
	f.Add(gifBytes(f, gradient(3, 2)))
	f.Add(webpFile(f, "small.webp"))
	f.Add(webpFile(f, "alpha.webp"))
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8X"))
	f.Add([]byte("%PDF-1.4"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mime, err := images.Detect(data)
		switch {
		case err == nil && mime != images.PNG && mime != images.JPEG && mime != images.GIF && mime != images.WebP:
			t.Fatalf("Detect accepted %q", mime)
		case err != nil && !errors.Is(err, images.ErrUnsupported):
			t.Fatalf("untyped error: %v", err)
		case err != nil && mime != "":
			t.Fatalf("error %v with mime %q", err, mime)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add("iVBORw0KGgo=")
	f.Add("iVBORw0KGgo")
	f.Add("-_-_")
	f.Add("QQ=\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		data, err := images.Decode(text)
		if err != nil {
			if !errors.Is(err, images.ErrInvalidBase64) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		// What decodes, decodes again to the same bytes from its canonical form.
		again, err := images.Decode(b64(data))
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("round trip of %q failed: %v", text, err)
		}
	})
}

func BenchmarkShrinkLargePNG(b *testing.B) {
	// A 4000x3000 photo-like PNG: smooth colour with a little grain.
	img := gradient(4000, 3000)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range img.Pix {
		if i%4 != 3 {
			img.Pix[i] += uint8(r.IntN(8))
		}
	}
	in := b64(pngBytes(b, img))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := images.Shrink(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
