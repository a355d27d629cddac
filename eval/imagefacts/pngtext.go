package imagefacts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// ErrNoText: the PNG has no tEXt chunk with the keyword asked for.
var ErrNoText = errors.New("no tEXt chunk with that keyword")

// WithText returns a copy of the PNG data with a tEXt chunk (keyword, text)
// placed right after the header chunk. The PNG specification limits a
// keyword to 1 to 79 Latin-1 characters without NUL; text must not hold a
// NUL either, as the NUL separates the two.
func WithText(data []byte, keyword, text string) ([]byte, error) {
	if len(keyword) < 1 || len(keyword) > 79 || bytes.IndexByte([]byte(keyword), 0) >= 0 {
		return nil, fmt.Errorf("png text: keyword %q must be 1 to 79 bytes without NUL", keyword)
	}
	if bytes.IndexByte([]byte(text), 0) >= 0 {
		return nil, fmt.Errorf("png text: text for %q contains a NUL", keyword)
	}
	chunks, err := pngChunks(data)
	if err != nil {
		return nil, err
	}
	if len(chunks) == 0 || chunks[0].kind != "IHDR" {
		return nil, errors.New("png text: the first chunk is not IHDR")
	}
	at := chunks[0].end
	payload := append([]byte(keyword+"\x00"), text...)
	out := make([]byte, 0, len(data)+12+len(payload))
	out = append(out, data[:at]...)
	out = appendChunk(out, "tEXt", payload)
	out = append(out, data[at:]...)
	return out, nil
}

// ReadText returns the text of the first tEXt chunk with keyword. A chunk
// whose CRC does not match is an error, not a miss: the data is damaged.
func ReadText(data []byte, keyword string) (string, error) {
	chunks, err := pngChunks(data)
	if err != nil {
		return "", err
	}
	for _, c := range chunks {
		if c.kind != "tEXt" {
			continue
		}
		k, v, ok := bytes.Cut(c.data, []byte{0})
		if ok && string(k) == keyword {
			return string(v), nil
		}
	}
	return "", fmt.Errorf("png text %q: %w", keyword, ErrNoText)
}

type pngChunk struct {
	kind string
	data []byte
	end  int // offset just past the chunk's CRC
}

// pngChunks splits a PNG into its chunks, checking each CRC.
func pngChunks(data []byte) ([]pngChunk, error) {
	if !bytes.HasPrefix(data, []byte(pngSignature)) {
		return nil, errors.New("png text: not a PNG")
	}
	var out []pngChunk
	off := len(pngSignature)
	for off < len(data) {
		if len(data)-off < 12 {
			return nil, fmt.Errorf("png text: truncated chunk at byte %d", off)
		}
		n := binary.BigEndian.Uint32(data[off:])
		if uint64(n) > uint64(len(data)-off-12) {
			return nil, fmt.Errorf("png text: chunk at byte %d declares %d bytes, past the end", off, n)
		}
		body := data[off+4 : off+8+int(n)]
		crc := binary.BigEndian.Uint32(data[off+8+int(n):])
		if crc32.ChecksumIEEE(body) != crc {
			return nil, fmt.Errorf("png text: chunk %q at byte %d fails its CRC", body[:4], off)
		}
		end := off + 12 + int(n)
		out = append(out, pngChunk{kind: string(body[:4]), data: body[4:], end: end})
		off = end
		if string(body[:4]) == "IEND" {
			break
		}
	}
	return out, nil
}

func appendChunk(out []byte, kind string, payload []byte) []byte {
	out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
	start := len(out)
	out = append(out, kind...)
	out = append(out, payload...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[start:]))
}
