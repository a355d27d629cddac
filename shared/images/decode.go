package images

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/webp"
)

// Info is what Validate learned of a whole, decodable image.
type Info struct {
	MimeType string // read from the bytes
	Width    int
	Height   int
	// MustShrink: the image breaks a storage limit (MaxSide, MaxBase64),
	// so it is stored as the smaller copy Shrink makes.
	MustShrink bool
}

// Validate is the one check every image durachat stores passes, whatever
// route brought it (Shrink runs it on every inline image; a route storing
// bytes it did not receive inline, such as an uploaded object, calls it
// itself): the bytes are a PNG, JPEG, GIF or WebP image (the format read
// from the bytes), its declared size is within the decompression guard, and
// the whole image decodes, every frame of a GIF included, within the
// process's decode budget (ProcessBudget). A truncated or corrupt image is
// ErrUnsupported, an image that would take more than the budget to decode
// ErrTooLarge, and a decode that waited for the budget in vain ErrBusy.
//
// Info says whether the image must be shrunk before it is stored (Shrink
// does that).
func Validate(ctx context.Context, data []byte) (Info, error) {
	mimeType, cfg, err := detect(data)
	if err != nil {
		return Info{}, err
	}
	info := Info{MimeType: mimeType, Width: cfg.Width, Height: cfg.Height, MustShrink: mustShrink(cfg, len(data))}
	if err := (detected{data, mimeType, cfg}).decodeWithin(ctx, 0, func(image.Image) error { return nil }); err != nil {
		return Info{}, err
	}
	return info, nil
}

// detected is an image's bytes with what detect read of them.
type detected struct {
	data     []byte
	mimeType string
	cfg      image.Config
}

// decodeWithin decodes the whole of a detected image within the process's
// decode budget and hands it to use, which may scale it to at most
// scaleSide pixels on its long side (0: no scaling); the budget is held
// until use returns, and the image must not be kept past it. Without
// scaling, a PNG is checked whole by checkPNG and use gets nil.
func (d detected) decodeWithin(ctx context.Context, scaleSide int, use func(image.Image) error) error {
	data, mimeType, cfg := d.data, d.mimeType, d.cfg
	if err := checkDecodable(cfg); err != nil {
		return err
	}
	if mimeType == PNG && scaleSide == 0 {
		// A PNG kept as it is needs checking, not its image.
		if err := checkPNG(data); err != nil {
			return err
		}
		return use(nil)
	}
	cost, err := decodeCost(data, mimeType, cfg)
	if err != nil {
		return err
	}
	if scaleSide > 0 {
		cost += scaleCost(cfg.Width, cfg.Height, scaleSide)
	}
	release, err := ProcessBudget().acquire(ctx, cost)
	if err != nil {
		return err
	}
	defer release()
	img, err := decodeWhole(data, mimeType)
	if err != nil {
		return err
	}
	return use(img)
}

// decodeWhole decodes every byte of the image: every chunk of a PNG up to
// its end, a JPEG up to its end marker, every frame of a GIF up to its
// trailer. A GIF is its first frame.
func decodeWhole(data []byte, mimeType string) (image.Image, error) {
	var img image.Image
	var err error
	r := bytes.NewReader(data)
	switch mimeType {
	case PNG:
		img, err = png.Decode(r)
	case JPEG:
		img, err = jpeg.Decode(r)
	case GIF:
		var all *gif.GIF
		if all, err = gif.DecodeAll(r); err == nil {
			img = all.Image[0]
		}
	case WebP:
		img, err = webp.Decode(r)
	default:
		return nil, badImage(ErrUnsupported, mimeType, nil)
	}
	if err != nil {
		return nil, badImage(ErrUnsupported, "the "+formatName(mimeType)+" is cut short or its image data is corrupt", err)
	}
	return img, nil
}

// decodeCost is an upper bound of the bytes decoding the image allocates,
// read from its header (and, for a GIF, from the sizes of its frames).
func decodeCost(data []byte, mimeType string, cfg image.Config) (int64, error) {
	pixels := int64(cfg.Width) * int64(cfg.Height)
	switch mimeType {
	case PNG:
		// The image, two rows being unfiltered, and for an interlaced
		// image each pass's image before they are merged.
		n := pixels*bytesPerPixel(cfg.ColorModel) + 2*int64(cfg.Width)*8 + 1<<16
		if len(data) > 28 && data[28] == 1 {
			n *= 2
		}
		return n, nil
	case JPEG:
		return jpegCost(data, cfg)
	case GIF:
		return gifCost(data)
	case WebP:
		// Lossy: YCbCr planes and alpha, about 3 bytes a pixel. Lossless:
		// ARGB words, a transform's copy of them, and the NRGBA image.
		if len(data) >= 16 && string(data[12:16]) == "VP8 " {
			return pixels*3 + 1<<16, nil
		}
		return pixels*12 + 1<<16, nil
	}
	return 0, badImage(ErrUnsupported, mimeType, nil)
}

// scaleCost is what scaling a w x h image to side pixels on its long side
// allocates: the scaled image and its flattened copy, the encoded copy,
// one source row and the accumulators of one output row.
func scaleCost(w, h, side int) int64 {
	dw, dh := fitSize(w, h, side)
	out := int64(dw) * int64(dh) * 4
	return 3*out + int64(w)*4 + int64(dw)*48 + 1<<16
}

// bytesPerPixel is what one pixel takes in the image type of a color model.
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.RGBAModel, color.NRGBAModel, color.CMYKModel:
		return 4
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8
}

// jpegCost reads a JPEG's frame header: the decoder allocates one plane of
// 8x8 blocks per component, a progressive JPEG four bytes more a sample for
// its coefficients, and a CMYK or RGB JPEG one more image of 4 bytes a
// pixel to convert to.
func jpegCost(data []byte, cfg image.Config) (int64, error) {
	sof, progressive, err := jpegFrame(data)
	if err != nil {
		return 0, err
	}
	// sof: precision, height(2), width(2), count, then 3 bytes a component.
	if len(sof) < 6 || len(sof) < 6+3*int(sof[5]) || sof[5] == 0 {
		return 0, badImage(ErrUnsupported, "JPEG frame header is malformed", nil)
	}
	n := int(sof[5])
	hmax, vmax := 1, 1
	for i := range n {
		hv := sof[6+3*i+1]
		hmax, vmax = max(hmax, int(hv>>4)), max(vmax, int(hv&15))
	}
	blocksX := (int64(cfg.Width) + int64(8*hmax) - 1) / int64(8*hmax)
	blocksY := (int64(cfg.Height) + int64(8*vmax) - 1) / int64(8*vmax)
	var cost int64
	for i := range n {
		hv := sof[6+3*i+1]
		blocks := blocksX * int64(max(1, int(hv>>4))) * blocksY * int64(max(1, int(hv&15)))
		cost += blocks * 64
		if progressive {
			cost += blocks * 64 * 4
		}
	}
	if n >= 3 {
		cost += int64(cfg.Width) * int64(cfg.Height) * 4
	}
	return cost + 1<<16, nil
}

// jpegFrame returns the body of a JPEG's start-of-frame segment, and
// whether the JPEG is progressive.
func jpegFrame(data []byte) (sof []byte, progressive bool, err error) {
	bad := func(what string) ([]byte, bool, error) {
		return nil, false, badImage(ErrUnsupported, "JPEG "+what, nil)
	}
	i := 2
	for {
		for i < len(data) && data[i] == 0xff && i+1 < len(data) && data[i+1] == 0xff {
			i++ // fill bytes
		}
		if i+4 > len(data) {
			return bad("ends before its frame header")
		}
		if data[i] != 0xff {
			return bad("segment does not start with a marker")
		}
		marker := data[i+1]
		if marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7) {
			i += 2
			continue
		}
		length := int(binary.BigEndian.Uint16(data[i+2:]))
		if length < 2 || i+2+length > len(data) {
			return bad("segment runs past the end")
		}
		body := data[i+4 : i+2+length]
		switch marker {
		case 0xc0, 0xc1, 0xc2:
			return body, marker == 0xc2, nil
		case 0xda, 0xd9:
			return bad("has no frame header before its scan")
		}
		i += 2 + length
	}
}

// gifCost walks a GIF's blocks without decompressing them: every frame is
// decoded into an image of its own size, with a palette of its own.
func gifCost(data []byte) (int64, error) {
	bad := func(what string) (int64, error) {
		return 0, badImage(ErrUnsupported, "GIF "+what, nil)
	}
	if len(data) < 13 {
		return bad("is cut short")
	}
	i := 13
	if flags := data[10]; flags&0x80 != 0 {
		i += 3 << (flags&7 + 1)
	}
	skipSubBlocks := func() bool {
		for {
			if i >= len(data) {
				return false
			}
			n := int(data[i])
			i += 1 + n
			if n == 0 {
				return i <= len(data)
			}
		}
	}
	cost := int64(1 << 16)
	for {
		if i >= len(data) {
			return bad("is cut short: no trailer")
		}
		switch data[i] {
		case 0x21: // extension: label, then sub-blocks
			i += 2
			if !skipSubBlocks() {
				return bad("is cut short in an extension")
			}
		case 0x2c: // image descriptor
			if i+10 > len(data) {
				return bad("is cut short in a frame header")
			}
			w := int64(binary.LittleEndian.Uint16(data[i+5:]))
			h := int64(binary.LittleEndian.Uint16(data[i+7:]))
			flags := data[i+9]
			i += 10
			cost += w*h + 8<<10
			if flags&0x80 != 0 {
				i += 3 << (flags&7 + 1)
			}
			i++ // LZW minimum code size
			if !skipSubBlocks() {
				return bad("is cut short in a frame's data")
			}
		case 0x3b:
			return cost, nil
		default:
			return bad(fmt.Sprintf("has an unknown block 0x%02x", data[i]))
		}
	}
}

// fitSize is the size of a w x h image scaled to at most side pixels on its
// long side, keeping its aspect ratio.
func fitSize(w, h, side int) (int, int) {
	if max(w, h) <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, int((int64(h)*int64(side)+int64(w)/2)/int64(w)))
	}
	return max(1, int((int64(w)*int64(side)+int64(h)/2)/int64(h))), side
}

// scale shrinks src to dw x dh pixels by averaging the source pixels that
// fall on each output pixel (a box filter). It reads src a row at a time, so
// it allocates the output, one source row and one output row of sums: no
// intermediate image of the source's height, as a separable kernel scaler
// would. dw and dh are at most src's size.
func scale(src image.Image, dw, dh int) *image.RGBA {
	b := src.Bounds()
	sw, sh := b.Dx(), b.Dy()
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	row := image.NewRGBA(image.Rect(0, 0, sw, 1))
	col := make([]int32, sw) // the output column of each source column
	colN := make([]uint64, dw)
	for x := range sw {
		t := int32(int64(x) * int64(dw) / int64(sw))
		col[x] = t
		colN[t]++
	}
	sum := make([]uint64, 4*dw)
	ty, rows := 0, uint64(0)
	flush := func() {
		out := dst.Pix[ty*dst.Stride : ty*dst.Stride+4*dw]
		for tx := range dw {
			n := colN[tx] * rows
			for c := 4 * tx; c < 4*tx+4; c++ {
				out[c] = uint8((sum[c] + n/2) / n)
				sum[c] = 0
			}
		}
		rows = 0
	}
	for y := range sh {
		if t := int(int64(y) * int64(dh) / int64(sh)); t != ty {
			flush()
			ty = t
		}
		draw.Draw(row, row.Rect, src, image.Pt(b.Min.X, b.Min.Y+y), draw.Src)
		p := row.Pix
		for x := range sw {
			s, d := 4*x, 4*int(col[x])
			sum[d] += uint64(p[s])
			sum[d+1] += uint64(p[s+1])
			sum[d+2] += uint64(p[s+2])
			sum[d+3] += uint64(p[s+3])
		}
		rows++
	}
	flush()
	return dst
}
