// Package imagestest makes hostile images for tests: small files that
// decode into a great deal of memory.
package imagestest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
)

// PNGChunk is one chunk of a PNG: length, type, data and CRC.
func PNGChunk(typ string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, typ...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// BombPNG is a whole, valid PNG of w x h pixels, all zeros, of 16-bit RGBA
// (colour type 6, depth 16): a file of a few hundred kilobytes that decodes
// into w*h*8 bytes. It is written a row at a time, never held decoded.
func BombPNG(w, h int) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 16, 6, 0, 0, 0)
	var idat bytes.Buffer
	zw, err := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	if err != nil {
		panic(err) // the level is valid
	}
	row := make([]byte, 1+w*8) // filter byte 0, then zeros
	for range h {
		zw.Write(row) // writes to a bytes.Buffer do not fail
	}
	zw.Close()
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, PNGChunk("IHDR", ihdr)...)
	out = append(out, PNGChunk("IDAT", idat.Bytes())...)
	return append(out, PNGChunk("IEND", nil)...)
}

// NoisyPNG is an opaque RGB PNG of w x h pixels of noise from seed, stored
// without compression: about 3*w*h bytes that every decoder must read
// whole, the shape of the largest honest upload.
func NoisyPNG(seed uint64, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.Uint32())
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, img); err != nil {
		panic(err) // a bytes.Buffer does not fail
	}
	return buf.Bytes()
}
