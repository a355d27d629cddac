package hooks

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
)

// The floor benchmarks time each hook against the work no version of it
// can skip on the same bytes, alternating the two call by call so that the
// load of a shared machine falls on both alike; the ratio (x-floor) is the
// figure, not the times.

// screenshotPNG is a 1920x1080 screenshot-like PNG: flat panels, lines of
// small glyph-like marks, and one noisy picture, compressed as a
// screenshot tool does (zlib's default level).
func screenshotPNG(t testing.TB) []byte {
	t.Helper()
	const w, h = 1920, 1080
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1920, 1080))
	panels := []color.NRGBA{{243, 243, 243, 255}, {255, 255, 255, 255}, {30, 30, 36, 255}, {225, 235, 250, 255}}
	for y := range h {
		for x := range w {
			c := panels[(x/480+y/270)%len(panels)]
			switch {
			case x >= 1200 && x < 1700 && y >= 300 && y < 700: // a photo
				c = color.NRGBA{uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255}
			case y%24 >= 6 && y%24 < 18 && (x/9)%7 != 0 && r.IntN(3) == 0: // text
				c = color.NRGBA{c.R / 4, c.G / 4, c.B / 3, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// screenshotResult is a tool result of one line of text and a 1920x1080
// screenshot, within the stored-image limits as it is.
func screenshotResult(b testing.TB) []byte {
	content := list{textBlock("took a screenshot"), imageBlock(base64.StdEncoding.EncodeToString(screenshotPNG(b)))}
	body, err := json.Marshal(afterTool(obj{"id": "c1", "name": "screenshot"}, content))
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// readFloor reads a body into one buffer of its declared size.
func readFloor(r *http.Request) []byte {
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		panic(err)
	}
	return body
}

// afterToolFloor is the irreducible work of after-tool: the body read,
// one JSON validity pass, and for each image its base64 text found,
// hashed as it is (its name), decoded, and checked as a PNG by inflating
// all its image data; then the answer written, the body with a ref in
// place of each image.
func afterToolFloor(w http.ResponseWriter, r *http.Request) {
	body := readFloor(r)
	if !rawjson.Valid(body) {
		panic("invalid JSON")
	}
	answer := make([]byte, 0, 64<<10)
	key := []byte(`"data":"`)
	prev := 0
	for {
		i := bytes.Index(body[prev:], key)
		if i < 0 {
			break
		}
		start := prev + i + len(key)
		end := start + bytes.IndexByte(body[start:], '"')
		b64 := body[start:end]
		sum := sha256.Sum256(b64)
		data := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
		n, err := base64.StdEncoding.Decode(data, b64)
		if err != nil {
			panic(err)
		}
		inflatePNG(data[:n])
		answer = append(answer, body[prev:prev+i]...)
		answer = append(answer, `"text":"`+refs.Ref(hex.EncodeToString(sum[:8]))+`"`...)
		prev = end + 1
	}
	answer = append(answer, body[prev:]...)
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

// inflatePNG inflates a PNG's image data to its end.
func inflatePNG(data []byte) {
	var idat []io.Reader
	for i := 8; i+12 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[i:]))
		if string(data[i+4:i+8]) == "IDAT" {
			idat = append(idat, bytes.NewReader(data[i+8:i+8+n]))
		}
		i += 12 + n
	}
	z, err := zlib.NewReader(io.MultiReader(idat...))
	if err != nil {
		panic(err)
	}
	if _, err := io.Copy(io.Discard, z); err != nil {
		panic(err)
	}
}

// post sends body to h on path as tenant A and returns the answer.
func post(b testing.TB, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r = r.WithContext(api.WithTenant(r.Context(), tenantA))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %.300s", w.Code, w.Body)
	}
	return w
}

// discard is a ResponseWriter that keeps only the status and how many
// bytes were written: the timed calls pay for their answer, not for a
// recorder copying it.
type discard struct {
	header http.Header
	code   int
	n      int
}

func (d *discard) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}

func (d *discard) WriteHeader(code int) {
	if d.code == 0 {
		d.code = code
	}
}

func (d *discard) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	d.n += len(p)
	return len(p), nil
}

// call sends body to h on path as tenant A, the answer discarded, and
// returns how long the handler took.
func call(b *testing.B, h http.Handler, path string, body []byte) time.Duration {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r = r.WithContext(api.WithTenant(r.Context(), tenantA))
	w := &discard{}
	start := time.Now()
	h.ServeHTTP(w, r)
	took := time.Since(start)
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	return took
}

// benchFloor runs hook and floor alternately on the same body, each first
// in every other iteration, and reports each one's time per call and their
// ratio.
func benchFloor(b *testing.B, path string, body []byte, hook, floor http.Handler) {
	post(b, hook, path, body) // the images are stored from here on, as for a retried hook
	post(b, floor, path, body)
	var inHook, inFloor time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			inHook += call(b, hook, path, body)
			inFloor += call(b, floor, path, body)
		} else {
			inFloor += call(b, floor, path, body)
			inHook += call(b, hook, path, body)
		}
	}
	b.ReportMetric(float64(inHook.Microseconds())/1000/float64(b.N), "hook-ms")
	b.ReportMetric(float64(inFloor.Microseconds())/1000/float64(b.N), "floor-ms")
	b.ReportMetric(float64(inHook)/float64(inFloor), "x-floor")
	b.ReportMetric(0, "ns/op") // the pair's time: read hook-ms and floor-ms
}

func offloadMux() *http.ServeMux {
	mux := http.NewServeMux()
	blobs := storefake.NewBlobs()
	NewOffload(images.New(blobs), lifecycle.New(lifecycle.Config{Table: storefake.NewTable(), Blobs: blobs})).Register(mux)
	return mux
}

// BenchmarkAfterToolFloor times after-tool against its floor on the 5 MB
// result of 4 images and on one screenshot.
func BenchmarkAfterToolFloor(b *testing.B) {
	for _, in := range []struct {
		name string
		body func(testing.TB) []byte
	}{{"5MB-4images", func(t testing.TB) []byte { return fiveMBResult(t.(*testing.B)) }}, {"screenshot", screenshotResult}} {
		b.Run(in.name, func(b *testing.B) {
			benchFloor(b, "/v1/chats/c/hooks/after-tool", in.body(b), offloadMux(), http.HandlerFunc(afterToolFloor))
		})
	}
}

// beforeRequestFloor is the irreducible work of before-request in format:
// the body read, each distinct image named by a ref read once from the
// store, and the answer written once into one buffer sized for it, each
// ref giving way to its image's block head and base64; an image is
// encoded once, straight into the answer where it is first named, and
// copied from there where it is named again.
func beforeRequestFloor(imgs *images.Store, format string) http.HandlerFunc {
	head := floorHeads[format]
	return func(w http.ResponseWriter, r *http.Request) {
		body := readFloor(r)
		type at struct{ start, end int }
		var found []at
		read := map[string][]byte{}
		size := len(body)
		for i := 0; ; {
			j := bytes.Index(body[i:], []byte("[image "))
			if j < 0 {
				break
			}
			start := i + j
			end := start + refs.RefLen
			name := string(body[start+len("[image ") : end-1])
			if _, ok := read[name]; !ok {
				img, err := imgs.Get(r.Context(), tenantA, name)
				if err != nil {
					panic(err)
				}
				read[name] = img.Data
			}
			size += len(head) + base64.StdEncoding.EncodedLen(len(read[name]))
			found = append(found, at{start, end})
			i = end
		}
		answer := make([]byte, 0, size)
		encoded := map[string]at{}
		prev := 0
		for _, f := range found {
			answer = append(answer, body[prev:f.start]...)
			answer = append(answer, head...)
			name := string(body[f.start+len("[image ") : f.end-1])
			if e, ok := encoded[name]; ok {
				answer = append(answer, answer[e.start:e.end]...)
			} else {
				start := len(answer)
				answer = base64.StdEncoding.AppendEncode(answer, read[name])
				encoded[name] = at{start, len(answer)}
			}
			prev = f.end
		}
		answer = append(answer, body[prev:]...)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}
}

// floorHeads is what each format writes before an image's base64, in the
// place of a ref's text.
var floorHeads = map[string]string{
	FormatAnthropic: `","type":"image","source":{"type":"base64","media_type":"image/png","data":"`,
	FormatPi:        `","type":"image","mimeType":"image/png","name":"0123456789abcdef","data":"`,
	FormatBedrock:   `"},{"image":{"format":"png","source":{"bytes":"`,
	FormatOpenAI:    `","type":"image_url","image_url":{"url":"data:image/png;base64,`,
}

// beforeRequestInput stores pngs for tenant A and returns a before-request
// body in format of n ref blocks naming them in turn (half in the user's
// own content, half in a tool result where the format takes images there)
// after history turns of about 5 KB of text each, with the store.
func beforeRequestInput(b *testing.B, format string, pngs [][]byte, n, history int) ([]byte, store.Blobs) {
	blobs := storefake.NewBlobs()
	imgs := images.New(blobs)
	var names []string
	for _, p := range pngs {
		name, err := imgs.Put(context.Background(), tenantA, base64.StdEncoding.EncodeToString(p))
		if err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	block := textBlock
	if format == FormatBedrock {
		block = func(s string) obj { return obj{"text": s} }
	}
	var content list
	for i := range n {
		content = append(content, block(refs.Ref(names[i%len(names)])))
	}
	half := (n + 1) / 2
	req := floorRequest(format, content[:half], content[half:])
	var turns list
	for i := range history {
		said := fmt.Sprintf("turn %d: %s", i, strings.Repeat("a line of the chat, \"quoted\" and\n", 150))
		turns = append(turns, obj{"role": "user", "content": list{block(said)}}, obj{"role": "assistant", "content": "ok"})
	}
	req["messages"] = append(turns, req["messages"].(list)...)
	body, err := json.Marshal(restoreBody(format, req))
	if err != nil {
		b.Fatal(err)
	}
	return body, blobs
}

// floorRequest is a request in format of two turns: own in a user message,
// inTool in a tool result (in a second user message for OpenAI, whose tool
// messages take no images).
func floorRequest(format string, own, inTool list) obj {
	second := map[string]any{
		FormatAnthropic: obj{"role": "user", "content": list{obj{"type": "tool_result", "tool_use_id": "t", "content": inTool}}},
		FormatPi:        obj{"role": "toolResult", "toolCallId": "t", "toolName": "screenshot", "content": inTool},
		FormatBedrock:   obj{"role": "user", "content": list{obj{"toolResult": obj{"toolUseId": "t", "content": inTool}}}},
		FormatOpenAI:    obj{"role": "user", "content": inTool},
	}[format]
	return obj{"model": "m", "max_tokens": 100, "messages": list{
		obj{"role": "user", "content": own},
		obj{"role": "assistant", "content": "ok"},
		second,
	}}
}

// BenchmarkBeforeRequestFloor times before-request against its floor,
// from a store that answers at once, in each format: on 20 refs naming 5
// images, on one ref to a screenshot, and on that ref after a chat of
// 1 MB of text (200 turns), which the hook walks and the floor only
// searches for refs.
func BenchmarkBeforeRequestFloor(b *testing.B) {
	fiveImages := func(t testing.TB) [][]byte {
		var pngs [][]byte
		for i := range 5 {
			pngs = append(pngs, pngBytes(t, 200+i, 160, 160, true))
		}
		return pngs
	}
	screenshot := func(t testing.TB) [][]byte { return [][]byte{screenshotPNG(t)} }
	for _, in := range []struct {
		name          string
		pngs          func(testing.TB) [][]byte
		refs, history int
	}{
		{"20refs-5images", fiveImages, 20, 0},
		{"screenshot", screenshot, 1, 0},
		{"screenshot-1MBchat", screenshot, 1, 200},
	} {
		pngs := in.pngs(b)
		for _, format := range []string{FormatAnthropic, FormatPi, FormatBedrock, FormatOpenAI} {
			b.Run(in.name+"/"+format, func(b *testing.B) {
				body, blobs := beforeRequestInput(b, format, pngs, in.refs, in.history)
				mux := http.NewServeMux()
				imgs := images.New(blobs)
				NewRestore(imgs, nil).Register(mux)
				const path = "/v1/chats/c/hooks/before-request"
				if w := post(b, mux, path, body); strings.Contains(w.Body.String(), `"unrestored":[{`) {
					b.Fatalf("not all restored: %.300s", w.Body)
				}
				benchFloor(b, path, body, mux, beforeRequestFloor(imgs, format))
			})
		}
	}
}
