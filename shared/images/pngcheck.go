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
	bad := func(format string, args ...any) error {
		return &FormatError{Kind: KindUnsupported, Detail: "the PNG is cut short or its image data is corrupt", Err: fmt.Errorf(format, args...)}
	}
	var (
		idat      []io.Reader
		ihdr      []byte
		hasPLTE   bool
		seenIEND  bool
		afterIDAT bool
	)
	for i := 8; !seenIEND; {
		if i+12 > len(data) {
			return bad("chunk header past the end")
		}
		n := int(binary.BigEndian.Uint32(data[i:]))
		if n < 0 || n > len(data)-i-12 {
			return bad("chunk of %d bytes past the end", n)
		}
		typ, body := string(data[i+4:i+8]), data[i+8:i+8+n]
		if crc32.ChecksumIEEE(data[i+4:i+8+n]) != binary.BigEndian.Uint32(data[i+8+n:]) {
			return bad("%s chunk fails its checksum", typ)
		}
		i += 12 + n
		switch {
		case ihdr == nil && typ != "IHDR":
			return bad("first chunk is %s, not IHDR", typ)
		case typ == "IHDR":
			if ihdr != nil || n != 13 {
				return bad("malformed IHDR")
			}
			ihdr = body
		case typ == "PLTE":
			if n == 0 || n%3 != 0 || n/3 > 256 || afterIDAT {
				return bad("malformed PLTE")
			}
			hasPLTE = true
		case typ == "IDAT":
			if afterIDAT {
				return bad("IDAT chunks are not consecutive")
			}
			idat = append(idat, bytes.NewReader(body))
		case typ == "IEND":
			seenIEND = true
		}
		if len(idat) > 0 && typ != "IDAT" {
			afterIDAT = true
		}
	}
	if len(idat) == 0 {
		return bad("no image data")
	}
	w, h := int64(binary.BigEndian.Uint32(ihdr[0:])), int64(binary.BigEndian.Uint32(ihdr[4:]))
	depth, colorType, interlace := int64(ihdr[8]), ihdr[9], ihdr[12]
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colorType]
	if channels == 0 || interlace > 1 {
		return bad("unsupported colour type %d or interlace %d", colorType, interlace)
	}
	if colorType == 3 && !hasPLTE {
		return bad("paletted image without a palette")
	}
	bitsPerPixel := channels * depth
	type pass struct{ w, h int64 }
	passes := []pass{{w, h}}
	if interlace == 1 {
		passes = nil
		for _, p := range [7][4]int64{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			passes = append(passes, pass{(w - p[0] + p[2] - 1) / p[2], (h - p[1] + p[3] - 1) / p[3]})
		}
	}
	zr, err := zlib.NewReader(io.MultiReader(idat...))
	if err != nil {
		return bad("%w", err)
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
				return bad("image data: %w", err)
			}
			if row[0] > 4 {
				return bad("bad filter type %d", row[0])
			}
		}
	}
	var one [1]byte
	switch n, err := zr.Read(one[:]); {
	case n > 0:
		return bad("more image data than the header declares")
	case err != nil && !errors.Is(err, io.EOF):
		return bad("image data: %w", err)
	}
	return nil
}
