package images_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/images/imagestest"
)

func bombPNG(_ testing.TB, w, h int) []byte { return imagestest.BombPNG(w, h) }

// randomIDAT keeps a PNG's header and chunk structure, CRCs included, but
// fills its image data with random bytes.
func randomIDAT(t testing.TB, data []byte) []byte {
	t.Helper()
	out := bytes.Clone(data)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 8; i+12 <= len(out); {
		n := int(binary.BigEndian.Uint32(out[i:]))
		body := out[i+8 : i+8+n]
		if string(out[i+4:i+8]) == "IDAT" {
			for k := range body {
				body[k] = byte(r.Uint32())
			}
			binary.BigEndian.PutUint32(out[i+8+n:], crc32.ChecksumIEEE(out[i+4:i+8+n]))
			return out
		}
		i += 12 + n
	}
	t.Fatal("no IDAT chunk")
	return nil
}

// splitIDAT puts a text chunk between a PNG's first IDAT chunk and the next.
func splitIDAT(t testing.TB, data []byte) []byte {
	t.Helper()
	for i := 8; i+12 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[i:]))
		if string(data[i+4:i+8]) == "IDAT" {
			end := i + 12 + n
			if string(data[end+4:end+8]) != "IDAT" {
				t.Fatal("the PNG has one IDAT chunk")
			}
			out := append(bytes.Clone(data[:end]), imagestest.PNGChunk("tEXt", []byte("k\x00v"))...)
			return append(out, data[end:]...)
		}
		i += 12 + n
	}
	t.Fatal("no IDAT chunk")
	return nil
}

func cut(data []byte, fraction float64) []byte {
	return bytes.Clone(data[:int(float64(len(data))*fraction)])
}

func TestBrokenImagesAreRefusedAfterAFullDecode(t *testing.T) {
	pngData := pngBytes(t, noise(300, 200))
	jpg := jpegBytes(t, noise(300, 200))
	animated := gifBytes(t, gradient(200, 100), noise(200, 100))
	tests := []struct {
		name string
		data []byte
	}{
		{"a PNG cut in half", cut(pngData, 0.5)},
		{"a PNG without its end chunk", pngData[:len(pngData)-12]},
		{"a PNG with random image data", randomIDAT(t, pngData)},
		{"a PNG whose image data is split by another chunk", splitIDAT(t, pngData)},
		{"a PNG with more image data than its header declares", withDeclaredSize(t, pngData, 300, 100)},
		{"a PNG with less image data than its header declares", withDeclaredSize(t, pngData, 300, 400)},
		{"a JPEG cut at 40%", cut(jpg, 0.4)},
		{"a JPEG cut just before its end marker", jpg[:len(jpg)-2]},
		{"a GIF cut in its second frame", cut(animated, 0.8)},
		{"a GIF without its trailer", animated[:len(animated)-1]},
		{"a lossy WebP cut in half", cut(webpFile(t, "small.webp"), 0.5)},
		{"a lossless WebP cut in half", cut(webpFile(t, "alpha.webp"), 0.5)},
		{"a large PNG cut in half, which Shrink would scale", cut(pngBytes(t, noise(2500, 300)), 0.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := images.Detect(tt.data); err != nil {
				t.Fatalf("the header check already refuses it (%v); the case tests nothing", err)
			}
			if _, err := images.Validate(t.Context(), tt.data); !errors.Is(err, images.ErrUnsupported) {
				t.Errorf("Validate error = %v, want ErrUnsupported", err)
			}
			if _, err := images.Shrink(t.Context(), b64(tt.data)); !errors.Is(err, images.ErrUnsupported) {
				t.Errorf("Shrink error = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestValidateReportsAWholeImage(t *testing.T) {
	tests := []struct {
		name   string
		data   []byte
		mime   string
		w, h   int
		shrink bool
	}{
		{"PNG", pngBytes(t, gradient(30, 20)), images.PNG, 30, 20, false},
		{"JPEG", jpegBytes(t, gradient(30, 20)), images.JPEG, 30, 20, false},
		{"animated GIF", gifBytes(t, gradient(30, 20), noise(30, 20)), images.GIF, 30, 20, false},
		{"WebP", webpFile(t, "alpha.webp"), images.WebP, 1000, 500, false},
		{"paletted PNG", pngBytes(t, image.NewPaletted(image.Rect(0, 0, 30, 20), color.Palette{color.Black, color.White})), images.PNG, 30, 20, false},
		{"PNG of many IDAT chunks", pngBytes(t, noise(300, 200)), images.PNG, 300, 200, false},
		{"gray PNG", pngBytes(t, image.NewGray(image.Rect(0, 0, 30, 20))), images.PNG, 30, 20, false},
		{"16-bit PNG", bombPNG(t, 30, 20), images.PNG, 30, 20, false},
		{"PNG over MaxSide", pngBytes(t, gradient(images.MaxSide+1, 10)), images.PNG, images.MaxSide + 1, 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := images.Validate(t.Context(), tt.data)
			if err != nil {
				t.Fatal(err)
			}
			want := images.Info{MimeType: tt.mime, Width: tt.w, Height: tt.h, MustShrink: tt.shrink}
			if info != want {
				t.Errorf("Validate = %+v, want %+v", info, want)
			}
		})
	}
}

// allocated runs fn and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodeMemoryIsBoundedByDecodedBytesNotPixels(t *testing.T) {
	// 16-bit RGBA under the 50-megapixel guard: 7071x7071 decodes into
	// 400 MB, past the whole budget, so it is refused from its header.
	bomb := bombPNG(t, 7071, 7071)
	t.Logf("bomb: %d KB", len(bomb)>>10)
	var err error
	n := allocated(func() { _, err = images.Shrink(t.Context(), b64(bomb)) })
	if !errors.Is(err, images.ErrTooLarge) {
		t.Fatalf("Shrink error = %v, want ErrTooLarge", err)
	}
	if limit := uint64(8 << 20); n > limit {
		t.Errorf("refusing it allocated %d MB, want under %d MB", n>>20, limit>>20)
	}
}

func TestDecodeWithinBudgetIsShrunkWithBoundedMemory(t *testing.T) {
	// 3000x2000 of 16-bit RGBA: 48 MB decoded, within the budget; the
	// scaler adds the output and a row, not a buffer of the source's height.
	bomb := bombPNG(t, 3000, 2000)
	decoded := uint64(3000 * 2000 * 8)
	var p images.Prepared
	var err error
	n := allocated(func() { p, err = images.Shrink(t.Context(), b64(bomb)) })
	if err != nil {
		t.Fatal(err)
	}
	if !p.Shrunk || p.MimeType != images.JPEG {
		t.Fatalf("not shrunk to JPEG: %+v", p.MimeType)
	}
	out := uint64(images.MaxSide * 1365 * 4)
	if limit := decoded + 4*out + 16<<20; n > limit {
		t.Errorf("Shrink allocated %d MB, want at most %d MB (decoded image, output and a window)", n>>20, limit>>20)
	}
}

func TestScaleAveragesEveryPixel(t *testing.T) {
	// A checkerboard of black and white shrunk by 4 on each side is an
	// even grey: every source pixel counts, none is skipped.
	img := image.NewGray(image.Rect(0, 0, 8192, 40))
	for y := range 40 {
		for x := range 8192 {
			if (x+y)%2 == 0 {
				img.SetGray(x, y, color.Gray{255})
			}
		}
	}
	p, err := images.Shrink(t.Context(), b64(pngBytes(t, img)))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := image.Decode(bytes.NewReader(p.Data))
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range []image.Point{{1, 1}, {1000, 5}, {2000, 8}} {
		r, g, b, _ := out.At(pt.X, pt.Y).RGBA()
		for _, c := range []uint32{r >> 8, g >> 8, b >> 8} {
			if c < 110 || c > 145 {
				t.Fatalf("pixel %v = %d, want about 128 (the average of the checkerboard)", pt, c)
			}
		}
	}
}

func TestProcessBudgetIsSharedByConcurrentDecodes(t *testing.T) {
	// A budget that fits one 1200x1200 JPEG decode (about 10 MB: its
	// planes and the RGBA it may convert to) at a time, and no second one:
	// every decode still succeeds, one after another.
	defer images.SetProcessBudget(images.ProcessBudget())
	b := images.NewBudget(14 << 20)
	images.SetProcessBudget(b)
	data := jpegBytes(t, gradient(1200, 1200))
	errs := make(chan error, 6)
	for range 6 {
		go func() {
			_, err := images.Validate(context.Background(), data)
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// One decode bigger than the whole budget is refused as too large.
	if _, err := images.Validate(t.Context(), jpegBytes(t, gradient(2000, 2000))); !errors.Is(err, images.ErrTooLarge) {
		t.Errorf("decode past the whole budget: error = %v, want ErrTooLarge", err)
	}
}

// FuzzValidate runs the full check with a small decode budget in force: no
// input panics, every refusal is typed, and no input allocates past the
// budget (plus the input's own size and the decoders' fixed tables).
func FuzzValidate(f *testing.F) {
	budget := images.NewBudget(8 << 20)
	images.SetProcessBudget(budget)
	f.Cleanup(func() { images.SetProcessBudget(images.NewBudget(images.DefaultDecodeBudget)) })
	pngData := pngBytes(f, noise(40, 30))
	jpg := jpegBytes(f, noise(40, 30))
	for _, seed := range [][]byte{
		pngData, cut(pngData, 0.5), randomIDAT(f, pngData),
		jpg, cut(jpg, 0.4),
		gifBytes(f, gradient(20, 10), noise(20, 10)),
		webpFile(f, "small.webp"), webpFile(f, "alpha.webp"),
		bombPNG(f, 400, 300),
		withDeclaredSize(f, pngData, 20_000, 2_000),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var err error
		n := allocated(func() { _, err = images.Validate(context.Background(), data) })
		if err != nil && !errors.Is(err, images.ErrUnsupported) && !errors.Is(err, images.ErrTooLarge) {
			t.Fatalf("untyped error: %v", err)
		}
		if limit := uint64(budget.Size()) + 4*uint64(len(data)) + 2<<20; n > limit {
			t.Fatalf("Validate allocated %d bytes, budget %d", n, budget.Size())
		}
		if _, err := images.Shrink(context.Background(), b64(data)); err != nil &&
			!errors.Is(err, images.ErrUnsupported) && !errors.Is(err, images.ErrTooLarge) {
			t.Fatalf("untyped error: %v", err)
		}
	})
}

// interlacedGray is an Adam7-interlaced 8-bit gray PNG of w x h pixels.
func interlacedGray(t *testing.T, w, h int) []byte {
	t.Helper()
	var raw bytes.Buffer
	for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw <= 0 || ph <= 0 {
			continue
		}
		for range ph {
			raw.WriteByte(0)
			raw.Write(bytes.Repeat([]byte{0x80}, pw))
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 0, 0, 0, 1)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, imagestest.PNGChunk("IHDR", ihdr)...)
	out = append(out, imagestest.PNGChunk("IDAT", z.Bytes())...)
	return append(out, imagestest.PNGChunk("IEND", nil)...)
}

func TestInterlacedPNGIsCheckedPassByPass(t *testing.T) {
	for _, size := range [][2]int{{37, 21}, {1, 1}, {3, 9}} {
		data := interlacedGray(t, size[0], size[1])
		if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
			t.Fatalf("%v: the reference decoder refuses the test's PNG: %v", size, err)
		}
		if _, err := images.Validate(t.Context(), data); err != nil {
			t.Errorf("%v: Validate refuses a whole interlaced PNG: %v", size, err)
		}
		if _, err := images.Validate(t.Context(), cut(data, 0.7)); !errors.Is(err, images.ErrUnsupported) {
			t.Errorf("%v: a cut interlaced PNG: error = %v, want ErrUnsupported", size, err)
		}
	}
}
