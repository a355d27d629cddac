package lambdafn_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/refs"
)

// onePNG is a small PNG of one colour, base64.
func onePNG(t *testing.T, c color.Color) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for i := range 16 {
		img.Set(i%4, i/4, c)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func jsonl(t *testing.T, lines ...any) []byte {
	var out []byte
	for _, l := range lines {
		out = append(out, mustJSON(t, l)...)
		out = append(out, '\n')
	}
	return out
}

func refsMessage(names ...string) obj {
	var content list
	for _, n := range names {
		content = append(content, obj{"type": "text", "text": refs.Ref(n)})
	}
	return obj{"role": "user", "timestamp": 1, "content": content}
}

// messageCount reads how many messages the chat reads back.
func messageCount(t *testing.T, mem *function, chat string) int {
	t.Helper()
	resp, _ := mem.request(t, http.MethodGet, "/v1/chats/"+chat+"/messages", "", nil)
	var page lifecycle.MessagePage
	if err := json.Unmarshal([]byte(resp.Body), &page); err != nil {
		t.Fatalf("%d %.300s", resp.StatusCode, resp.Body)
	}
	return len(page.Messages)
}

// TestTheMemoryFunctionImportsAllOrNothing: through the Lambda adapter, a
// file whose line 110 is a ref to nothing is refused naming that line, and
// nothing of it is logged.
func TestTheMemoryFunctionImportsAllOrNothing(t *testing.T) {
	mem := functions(t)["memory"]
	var lines []any
	for i := range 120 {
		lines = append(lines, obj{"seq": i, "message": obj{"role": "user", "timestamp": 1, "content": fmt.Sprintf("message %d", i)}})
	}
	lines[109] = obj{"seq": 109, "message": refsMessage("0123456789abcdef")}
	status, out, _ := mem.call(t, "/v1/chats/c/import", jsonl(t, lines...))
	if status != http.StatusBadRequest || !bytes.Contains(out, []byte(`"field":"line 110 message.content[0]"`)) {
		t.Fatalf("import = %d %s, want a 400 naming line 110", status, out)
	}
	if n := messageCount(t, mem, "c"); n != 0 {
		t.Fatalf("a refused import logged %d messages", n)
	}
}

// TestTheMemoryFunctionsImportCannotBindANameToOtherBytes: an image line
// carrying the name of other bytes is stored under its own name.
func TestTheMemoryFunctionsImportCannotBindANameToOtherBytes(t *testing.T) {
	mem := functions(t)["memory"]
	genuine, forged := onePNG(t, color.RGBA{255, 0, 0, 255}), onePNG(t, color.RGBA{0, 0, 255, 255})
	file := jsonl(t, obj{"image": obj{"name": images.Name(genuine), "mimeType": "image/png", "data": forged}},
		obj{"seq": 0, "message": refsMessage(images.Name(genuine))})
	status, out, _ := mem.call(t, "/v1/chats/c/import", file)
	var r lifecycle.ImportResult
	if err := json.Unmarshal(out, &r); status != http.StatusOK || err != nil || r.Renamed[images.Name(genuine)] != images.Name(forged) {
		t.Fatalf("import = %d %s, want the image renamed to its own name", status, out)
	}
	if _, err := mem.stores.Images().Get(t.Context(), "t", images.Name(genuine)); err == nil {
		t.Fatal("the import bound the name of other bytes")
	}
}

// TestTheMemoryFunctionsExportPartsStayWithinTheirBudget: a message of 999
// refs to one image of about 264 KiB, and one naming twelve images of
// about 507 KiB of base64, export in parts each within the part budget and
// Lambda's answer limit (call checks it), each image once per part.
func TestTheMemoryFunctionsExportPartsStayWithinTheirBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("megabytes of images: not in -short")
	}
	mem := functions(t)["memory"]
	var names []string
	for i := range 12 {
		img := noisyPNG(t, uint64(40+i), 360, 360)
		side := 360
		if i == 0 {
			img, side = noisyPNG(t, 40, 260, 260), 260
		}
		status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": list{
			obj{"type": "text", "text": fmt.Sprintf("an image of %d pixels a side", side)}, obj{"type": "image", "mimeType": "image/png", "data": img}}}}}))
		if status != http.StatusOK {
			t.Fatalf("append: %d %.300s", status, out)
		}
		names = append(names, images.Name(img))
	}
	many := make([]string, 999)
	for i := range many {
		many[i] = names[0]
	}
	for _, m := range []obj{refsMessage(many...), refsMessage(names...)} {
		if status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{m}})); status != http.StatusOK {
			t.Fatalf("append: %d %.300s", status, out)
		}
	}
	after, parts := "", 0
	for ; parts < 100; parts++ {
		q := ""
		if after != "" {
			q = "after=" + url.QueryEscape(after)
		}
		resp, n := mem.request(t, http.MethodGet, "/v1/chats/c/export", q, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("export %q: %d %.300s", q, resp.StatusCode, resp.Body)
		}
		if len(resp.Body) > lifecycle.PageBudget+1<<20 {
			t.Errorf("part %d is %d bytes (%d as Lambda's answer), over its budget", parts, len(resp.Body), n)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(resp.Body), "\n") {
			var l struct{ Image *struct{ Name string } }
			if json.Unmarshal([]byte(line), &l) == nil && l.Image != nil {
				if seen[l.Image.Name] {
					t.Errorf("part %d carries image %s twice", parts, l.Image.Name)
				}
				seen[l.Image.Name] = true
			}
		}
		if after = header(resp.Headers, lifecycle.ExportNextHeader); after == "" {
			break
		}
	}
	if parts+1 < 3 {
		t.Fatalf("%d parts: want the twelve images spread over several", parts+1)
	}
	t.Logf("%d parts", parts+1)
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
