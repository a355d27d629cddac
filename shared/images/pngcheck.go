package images

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// checkPNG reads a whole PNG without building its image: every chunk's CRC
// up to IEND, the palette a paletted image needs, and its compressed image
// data inflated to the end, which must hold exactly the rows its header
// declares, each with a valid filter type. That is every check decoding
// makes but unfiltering, which cannot fail, in the memory of one row and
// the inflater's window instead of the decoded image.
func checkPNG(data []byte) error {
	var c pngChunks
	for i, end := 8, false; !end; {
		typ, body, next, err := pngChunkAt(data, i)
		if err != nil {
			return err
		}
		if end, err = c.add(typ, body); err != nil {
			return err
		}
		i = next
	}
	if len(c.idat) == 0 {
		return badPNG("no image data")
	}
	passes, bitsPerPixel, err := c.passes()
	if err != nil {
		return err
	}
	return checkPNGRows(io.MultiReader(c.idat...), passes, bitsPerPixel)
}

// badPNG is a PNG that is cut short or corrupt, for the reason format
// tells.
func badPNG(format string, args ...any) error {
	return badImage(ErrUnsupported, "the PNG is cut short or its image data is corrupt", fmt.Errorf(format, args...))
}

// pngChunkAt reads the chunk at offset i of data, checking that it is
// whole and its CRC holds, and returns its type, its body and the offset
// of the next chunk.
func pngChunkAt(data []byte, i int) (typ string, body []byte, next int, err error) {
	if i+12 > len(data) {
		return "", nil, 0, badPNG("chunk header past the end")
	}
	n := int(binary.BigEndian.Uint32(data[i:]))
	if n < 0 || n > len(data)-i-12 {
		return "", nil, 0, badPNG("chunk of %d bytes past the end", n)
	}
	typ, body = string(data[i+4:i+8]), data[i+8:i+8+n]
	if crc32.ChecksumIEEE(data[i+4:i+8+n]) != binary.BigEndian.Uint32(data[i+8+n:]) {
		return "", nil, 0, badPNG("%s chunk fails its checksum", typ)
	}
	return typ, body, i + 12 + n, nil
}

// pngChunks is what checkPNG keeps of the chunks read so far.
type pngChunks struct {
	ihdr      []byte
	idat      []io.Reader
	hasPLTE   bool
	afterIDAT bool
}

// add checks a chunk's place and form among those before it (IHDR first
// and once, PLTE before the image data, the IDAT chunks consecutive) and
// keeps what the rows are checked with; end reports IEND.
func (c *pngChunks) add(typ string, body []byte) (end bool, err error) {
	n := len(body)
	switch {
	case c.ihdr == nil && typ != "IHDR":
		return false, badPNG("first chunk is %s, not IHDR", typ)
	case typ == "IHDR":
		if c.ihdr != nil || n != 13 {
			return false, badPNG("malformed IHDR")
		}
		c.ihdr = body
	case typ == "PLTE":
		if !validPLTE(n) || c.afterIDAT {
			return false, badPNG("malformed PLTE")
		}
		c.hasPLTE = true
	case typ == "IDAT":
		if c.afterIDAT {
			return false, badPNG("IDAT chunks are not consecutive")
		}
		c.idat = append(c.idat, bytes.NewReader(body))
	case typ == "IEND":
		end = true
	}
	if len(c.idat) > 0 && typ != "IDAT" {
		c.afterIDAT = true
	}
	return end, nil
}

// validPLTE reports whether a PLTE body of n bytes holds 1 to 256 whole
// RGB entries.
func validPLTE(n int) bool { return n > 0 && n%3 == 0 && n/3 <= 256 }

// pngPass is the size in pixels of one pass over the image: the whole
// image, or one of an interlaced image's seven.
type pngPass struct{ w, h int64 }

// passes reads the header's size, depth, colour type and interlace into
// the passes the image data holds, and the bits of a pixel.
func (c *pngChunks) passes() (passes []pngPass, bitsPerPixel int64, err error) {
	ihdr := c.ihdr
	w, h := int64(binary.BigEndian.Uint32(ihdr[0:])), int64(binary.BigEndian.Uint32(ihdr[4:]))
	depth, colorType, interlace := int64(ihdr[8]), ihdr[9], ihdr[12]
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colorType]
	if channels == 0 || interlace > 1 {
		return nil, 0, badPNG("unsupported colour type %d or interlace %d", colorType, interlace)
	}
	if colorType == 3 && !c.hasPLTE {
		return nil, 0, badPNG("paletted image without a palette")
	}
	if interlace == 0 {
		return []pngPass{{w, h}}, channels * depth, nil
	}
	for _, p := range [7][4]int64{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		passes = append(passes, pngPass{(w - p[0] + p[2] - 1) / p[2], (h - p[1] + p[3] - 1) / p[3]})
	}
	return passes, channels * depth, nil
}

// checkPNGRows inflates the image data to its end: it must hold exactly
// the rows of the passes, each with a valid filter type.
func checkPNGRows(idat io.Reader, passes []pngPass, bitsPerPixel int64) error {
	zr, err := zlib.NewReader(idat)
	if err != nil {
		return badPNG("%w", err)
	}
	defer zr.Close()
	var row []byte
	for _, p := range passes {
		if p.w <= 0 || p.h <= 0 {
			continue
		}
		rowLen := 1 + (p.w*bitsPerPixel+7)/8
		if int64(cap(row)) < rowLen {
			row = make([]byte, rowLen)
		}
		row = row[:rowLen]
		for range p.h {
			if _, err := io.ReadFull(zr, row); err != nil {
				return badPNG("image data: %w", err)
			}
			if row[0] > 4 {
				return badPNG("bad filter type %d", row[0])
			}
		}
	}
	var one [1]byte
	switch n, err := zr.Read(one[:]); {
	case n > 0:
		return badPNG("more image data than the header declares")
	case err != nil && !errors.Is(err, io.EOF):
		return badPNG("image data: %w", err)
	}
	return nil
}
