package importfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// ImageName is the name durachat stores an inline image under: the first
// 16 lowercase hex digits of the SHA-256 of its base64 text exactly as
// the file has it (the server's images.Name).
func ImageName(b64 string) string {
	h := sha256.New()
	_, _ = io.WriteString(h, b64) // a hash does not fail
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// ImageNameBytes is the ImageName of data's standard base64.
func ImageNameBytes(data []byte) string {
	h := sha256.New()
	enc := base64.NewEncoder(base64.StdEncoding, h)
	_, _ = enc.Write(data) // a hash does not fail
	_ = enc.Close()
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// ref is the ref text of an image: "[image <name>]" (the server's refs).
func ref(b64 string) string { return "[image " + ImageName(b64) + "]" }

// Shrink copies the file r to w, every line kept, with every inline image
// replaced by its ref, a text block of the host's own: a pi image block
// ({"type": "image", "data"}) and a Claude Code one ({"type": "image",
// "source": {"type": "base64"}}) by {"type": "text", "text": ref}, a Codex
// input_image of a data URL by {"type": "input_text", "text": ref}, and
// the base64 of a Claude Code toolUseResult's image file and an image's
// data URL standing alone as a string (Codex's events) by the ref. A
// line holding no image is copied byte for byte; one that does is written
// again with its keys in sorted order. It returns how many images it
// replaced. The images must be stored under those names first (an
// import of the same file) for the refs to name them.
func Shrink(r io.Reader, w io.Writer) (replaced int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		var v any
		if bytes.Contains(raw, []byte(`image`)) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if dec.Decode(&v) != nil {
				v = nil // not JSON: kept as it is
			}
		}
		var k int
		if v != nil {
			v, k = shrinkValue(v)
		}
		if k == 0 {
			bw.Write(raw)
			err = bw.WriteByte('\n')
		} else {
			err = enc.Encode(v)
		}
		if err != nil {
			return replaced, fmt.Errorf("writing line %d: %w", n, err)
		}
		replaced += k
	}
	if err := sc.Err(); err != nil {
		return replaced, fmt.Errorf("reading line %d: %w", n+1, err)
	}
	return replaced, bw.Flush()
}

// shrinkValue replaces the images in a decoded JSON value by their refs.
func shrinkValue(v any) (any, int) {
	n := 0
	switch x := v.(type) {
	case string:
		// A data URL on its own (the images of a Codex user_message event).
		if b := imageURLBlock(x); strings.HasPrefix(x, "data:image/") && b.Type == "image" {
			return ref(b.Data), 1
		}
	case []any:
		for i := range x {
			var k int
			x[i], k = shrinkValue(x[i])
			n += k
		}
	case map[string]any:
		if refText, typ := imageRef(x); refText != "" {
			return map[string]any{"type": typ, "text": refText}, 1
		}
		for key, e := range x {
			var k int
			x[key], k = shrinkValue(e)
			n += k
		}
		// A Claude Code toolUseResult's file: {"base64", "type": "image/..."}.
		if b, ok := x["base64"].(string); ok && b != "" {
			if t, _ := x["type"].(string); strings.HasPrefix(t, "image/") {
				x["base64"] = ref(b)
				n++
			}
		}
	}
	return v, n
}

// imageRef is the ref of an image block, of pi, Claude Code or Codex, and
// the type of the text block that takes its place; "" for anything else.
func imageRef(x map[string]any) (refText, textType string) {
	switch x["type"] {
	case "image":
		if d, _ := x["data"].(string); d != "" {
			return ref(d), "text"
		}
		if src, ok := x["source"].(map[string]any); ok && src["type"] == "base64" {
			if d, _ := src["data"].(string); d != "" {
				return ref(d), "text"
			}
		}
	case "input_image":
		u, _ := x["image_url"].(string)
		if b := imageURLBlock(u); b.Type == "image" {
			return ref(b.Data), "input_text"
		}
	}
	return "", ""
}
