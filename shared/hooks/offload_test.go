package hooks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
)

type afterToolAnswerT struct {
	Result struct {
		Content []map[string]json.RawMessage `json:"content"`
		IsError bool                         `json:"isError"`
		Details json.RawMessage              `json:"details"`
	} `json:"result"`
	Stored  []string      `json:"stored"`
	Inline  []InlineImage `json:"inline"`
	Skipped *string       `json:"skipped"`
}

func afterTool(call obj, content list) obj {
	return obj{"call": call, "result": obj{"content": content, "isError": false}}
}

func blockText(t *testing.T, b map[string]json.RawMessage) string {
	t.Helper()
	var typ, text string
	json.Unmarshal(b["type"], &typ)
	json.Unmarshal(b["text"], &text)
	if typ != "text" {
		t.Fatalf("block %v is not text", b)
	}
	return text
}

func TestToolResultImagesBecomeRefsInPlace(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, b := pngB64(t, 1, 8, 8), pngB64(t, 2, 8, 8)
		body := obj{
			"call": obj{"id": "c1", "name": "screenshot", "nested": false},
			"result": obj{
				"content": list{
					textBlock("before"),
					obj{"type": "image", "data": a, "mimeType": "image/png", "note": "kept"},
					textBlock("between"),
					imageBlock(b),
					imageBlock(a),
				},
				"isError": true,
				"details": obj{"path": "/tmp/x.png"},
			},
		}
		var got afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", body, &got)

		na, nb := images.Name(a), images.Name(b)
		want := []string{"before", refs.Ref(na), "between", refs.Ref(nb), refs.Ref(na)}
		if len(got.Result.Content) != len(want) {
			t.Fatalf("content has %d blocks, want %d", len(got.Result.Content), len(want))
		}
		for i, w := range want {
			if text := blockText(t, got.Result.Content[i]); text != w {
				t.Errorf("block %d = %q, want %q", i, text, w)
			}
		}
		if string(got.Result.Content[1]["note"]) != `"kept"` {
			t.Errorf("the image block's own field was dropped: %v", got.Result.Content[1])
		}
		if !got.Result.IsError || string(got.Result.Details) != `{"path":"/tmp/x.png"}` {
			t.Errorf("result fields changed: isError %v, details %s", got.Result.IsError, got.Result.Details)
		}
		if !slices.Equal(got.Stored, []string{na, nb}) || len(got.Inline) != 0 || got.Skipped != nil {
			t.Errorf("stored %v inline %v skipped %v", got.Stored, got.Inline, got.Skipped)
		}
		if !e.stored(t, tenantA, na) || !e.stored(t, tenantA, nb) {
			t.Error("images not in the tenant's store")
		}
		if e.stored(t, tenantB, na) {
			t.Error("image stored in another tenant's namespace")
		}
		if n := e.blobs.puts.Load(); n != 2 {
			t.Errorf("%d puts for 2 distinct images", n)
		}
	})
}

func TestResultWithoutImagesPassesThroughUnchanged(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		result := `{"content":[{"type":"text","text":"a <b> & c","x":[1,2.50]}],"isError":false,"details":{"z":1}}`
		body := []byte(`{"call":{"id":"c","name":"read"},"result":` + result + `}`)
		status, out := e.post(t, tenantA, "hooks/after-tool", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, out)
		}
		var got struct {
			Result  json.RawMessage
			Skipped *string
		}
		json.Unmarshal(out, &got)
		if !jsonEqual(t, got.Result, []byte(result)) || !strings.Contains(string(got.Result), `"x":[1,2.50]`) || got.Skipped != nil {
			t.Fatalf("result changed:\n got %s\nwant %s", got.Result, result)
		}
	})
}

func TestNestedCallsPassThrough(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a := pngB64(t, 3, 8, 8)
		result := `{"content":[{"type":"image","data":"` + a + `","mimeType":"image/png"}],"isError":false}`
		body := []byte(`{"call":{"id":"c","name":"screenshot","nested":true},"result":` + result + `}`)
		status, out := e.post(t, tenantA, "hooks/after-tool", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, out)
		}
		var got struct {
			Result  json.RawMessage
			Stored  []string
			Skipped *string
		}
		json.Unmarshal(out, &got)
		if got.Skipped == nil || *got.Skipped != SkippedNested {
			t.Fatalf("skipped %v, want nested", got.Skipped)
		}
		if !jsonEqual(t, got.Result, []byte(result)) || len(got.Stored) != 0 {
			t.Fatalf("nested result changed: %s", got.Result)
		}
		if e.blobs.puts.Load() != 0 || e.stored(t, tenantA, images.Name(a)) {
			t.Fatal("a nested call's image was stored")
		}
	})
}

func TestResultThatCouldPassTheBoundKeepsItsImages(t *testing.T) {
	img := pngB64(t, 4, 8, 8)
	// One text block and one image: the ref is 24 bytes, and each piece is
	// counted with its newline.
	cases := []struct {
		name   string
		text   string
		bounds obj
		skip   bool
	}{
		{"short text", "ok", nil, false},
		{"text at the default byte bound with the ref", strings.Repeat("x", DefaultMaxBytes-24-2), nil, false},
		{"one byte more", strings.Repeat("x", DefaultMaxBytes-24-1), nil, true},
		{"text alone over the bound", strings.Repeat("x", DefaultMaxBytes+10), nil, true},
		{"lines at the default line bound with the ref", strings.Repeat("\n", DefaultMaxLines-2), nil, false},
		{"one line more", strings.Repeat("\n", DefaultMaxLines-1), nil, true},
		{"request bound in bytes", strings.Repeat("x", 100), obj{"maxBytes": 100}, true},
		{"request bound in lines", "a\nb\nc", obj{"maxLines": 3}, true},
		{"request bound roomier than default", strings.Repeat("x", DefaultMaxBytes+10), obj{"maxBytes": 1 << 20}, false},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				body := afterTool(obj{"id": "c", "name": "read"}, list{textBlock(c.text), imageBlock(img)})
				if c.bounds != nil {
					body["bounds"] = c.bounds
				}
				var got afterToolAnswerT
				e.postOK(t, tenantA, "hooks/after-tool", body, &got)
				skipped := got.Skipped != nil && *got.Skipped == SkippedBound
				if skipped != c.skip {
					t.Fatalf("skipped %v, want bound skip %v", got.Skipped, c.skip)
				}
				var typ string
				json.Unmarshal(got.Result.Content[1]["type"], &typ)
				if c.skip && (typ != "image" || len(got.Stored) != 0) {
					t.Fatalf("a bound-skipped result was changed: block type %s, stored %v", typ, got.Stored)
				}
				if !c.skip && typ != "text" {
					t.Fatalf("image not offloaded: %s", typ)
				}
			})
		}
	})
}

func TestFailedPutKeepsThatImageInline(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, b, c := pngB64(t, 5, 8, 8), pngB64(t, 6, 8, 8), pngB64(t, 7, 8, 8)
		e.blobs.set(func(f *faultyBlobs) { f.failPut = keyHasName(images.Name(b)) })
		var got afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", afterTool(obj{"name": "shot"}, list{imageBlock(a), imageBlock(b), textBlock("t"), imageBlock(c)}), &got)

		if len(got.Inline) != 1 || got.Inline[0] != (InlineImage{Index: 1, Reason: ReasonUnavailable}) {
			t.Fatalf("inline %+v, want index 1 unavailable", got.Inline)
		}
		var data string
		json.Unmarshal(got.Result.Content[1]["data"], &data)
		if data != b {
			t.Fatal("the image whose put failed is not inline as it came")
		}
		if blockText(t, got.Result.Content[0]) != refs.Ref(images.Name(a)) || blockText(t, got.Result.Content[3]) != refs.Ref(images.Name(c)) {
			t.Fatal("the other images were not offloaded")
		}
		if !slices.Equal(got.Stored, []string{images.Name(a), images.Name(c)}) {
			t.Fatalf("stored %v", got.Stored)
		}
	})
}

func TestZoomResultKeepsItsStoredName(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		// Large enough to be shrunk when stored: the stored bytes are a
		// JPEG whose own name differs from the name it is stored under.
		original := pngB64(t, 8, 2100, 40)
		name := e.put(t, tenantA, original)
		img, err := e.images.Get(context.Background(), tenantA, name)
		if err != nil {
			t.Fatal(err)
		}
		storedB64 := base64.StdEncoding.EncodeToString(img.Data)
		if images.Name(storedB64) == name {
			t.Fatal("fixture: the stored copy was not shrunk")
		}
		puts := e.blobs.puts.Load()

		page := "1: look at " + refs.Ref(name)
		var got afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", afterTool(obj{"id": "z", "name": "zoom"}, list{
			textBlock(page),
			obj{"type": "image", "data": storedB64, "mimeType": img.MimeType, "name": name},
		}), &got)

		if blockText(t, got.Result.Content[0]) != page {
			t.Fatal("zoom's page text changed")
		}
		if blockText(t, got.Result.Content[1]) != refs.Ref(name) {
			t.Fatalf("zoom image became %s, want the ref of its stored name", got.Result.Content[1]["text"])
		}
		if _, ok := got.Result.Content[1]["name"]; ok {
			t.Fatal("the ref block still carries the image's name field")
		}
		if e.blobs.puts.Load() != puts {
			t.Fatal("a zoom result's image was put again")
		}
		if e.stored(t, tenantA, images.Name(storedB64)) {
			t.Fatal("a second key was made for a zoom image")
		}
	})
}

func TestNamedImageNotInTheStoreIsStoredByItsBytes(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a := pngB64(t, 9, 8, 8)
		claimed := "0123456789abcdef"
		var got afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", afterTool(obj{"name": "zoom"}, list{
			obj{"type": "image", "data": a, "mimeType": "image/png", "name": claimed},
		}), &got)
		if blockText(t, got.Result.Content[0]) != refs.Ref(images.Name(a)) {
			t.Fatalf("got %s", got.Result.Content[0]["text"])
		}
		if e.stored(t, tenantA, claimed) {
			t.Fatal("stored under a name the caller claimed")
		}
	})
}

func TestOffloadInputReturnsRefs(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a := pngB64(t, 10, 8, 8)
		var got struct {
			Message map[string]json.RawMessage
			Stored  []string
			Inline  []InlineImage
		}
		e.postOK(t, tenantA, "hooks/offload-input", obj{"message": obj{
			"role": "user", "timestamp": 1700000000000,
			"content": list{textBlock("what is this?"), imageBlock(a)},
		}}, &got)
		var content []map[string]json.RawMessage
		json.Unmarshal(got.Message["content"], &content)
		if blockText(t, content[1]) != refs.Ref(images.Name(a)) || blockText(t, content[0]) != "what is this?" {
			t.Fatalf("content %s", got.Message["content"])
		}
		if string(got.Message["timestamp"]) != "1700000000000" || string(got.Message["role"]) != `"user"` {
			t.Fatalf("message fields changed: %v", got.Message)
		}
		if !slices.Equal(got.Stored, []string{images.Name(a)}) || len(got.Inline) != 0 {
			t.Fatalf("stored %v inline %v", got.Stored, got.Inline)
		}

		// A string content has no images: it comes back as it is.
		e.postOK(t, tenantA, "hooks/offload-input", obj{"message": obj{"role": "user", "content": "hi"}}, &got)
		if string(got.Message["content"]) != `"hi"` {
			t.Fatalf("string content became %s", got.Message["content"])
		}

		status, out := e.post(t, tenantA, "hooks/offload-input", obj{"message": obj{"role": "assistant", "content": list{imageBlock(a)}}})
		wantError(t, status, out, http.StatusBadRequest, "message.role")
	})
}

// notDecodablePNG is a PNG header declaring a canvas far over what durachat
// decodes.
func hugePNG() []byte {
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], 30000)
	binary.BigEndian.PutUint32(ihdr[4:], 30000)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk := func(typ string, data []byte) {
		binary.Write(&buf, binary.BigEndian, uint32(len(data)))
		buf.WriteString(typ)
		buf.Write(data)
		binary.Write(&buf, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	chunk("IHDR", ihdr)
	chunk("IEND", nil)
	return buf.Bytes()
}

func TestBadImagesAreRefusedAndNothingIsStored(t *testing.T) {
	good := pngB64(t, 11, 8, 8)
	cases := []struct {
		name  string
		image string
		says  string // what the message says after the field
	}{
		{"invalid base64", "not*base64!", ": image: invalid base64: "},
		{"text, not an image", base64.StdEncoding.EncodeToString([]byte("hello, this is not an image at all")), ": image: unsupported image: "},
		{"BMP bytes sent as image/png", base64.StdEncoding.EncodeToString(append([]byte("BM"), make([]byte, 60)...)), ": image: unsupported image: "},
		{"image over the size limit", base64.StdEncoding.EncodeToString(hugePNG()), ": image: image too large: "},
		{"empty data", "", " is required: the image as base64"},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for _, route := range []string{"hooks/after-tool", "hooks/offload-input"} {
					content := list{textBlock("x"), imageBlock(good), imageBlock(c.image)}
					body, field := afterTool(obj{"name": "t"}, content), "result.content[2].data"
					if route == "hooks/offload-input" {
						body, field = obj{"message": obj{"role": "user", "content": content}}, "message.content[2].data"
					}
					before := e.blobs.puts.Load()
					status, out := e.post(t, tenantA, route, body)
					if msg := wantError(t, status, out, http.StatusBadRequest, field); !strings.HasPrefix(msg, field+c.says) {
						t.Errorf("%s: %s, want a message starting %q", route, out, field+c.says)
					}
					if e.blobs.puts.Load() != before {
						t.Fatalf("%s: an image was stored from a refused request", route)
					}
				}
			})
		}
		if e.stored(t, tenantA, images.Name(good)) {
			t.Fatal("the good image of a refused request was stored")
		}
	})
}

func TestMalformedOffloadRequestsNameTheField(t *testing.T) {
	cases := []struct {
		name, route, body, field string
	}{
		{"not JSON", "hooks/after-tool", `{"call":`, ""},
		{"no call", "hooks/after-tool", `{"result":{"content":[]}}`, "call"},
		{"nested not a bool", "hooks/after-tool", `{"call":{"nested":"yes"},"result":{"content":[]}}`, "call.nested"},
		{"no result", "hooks/after-tool", `{"call":{}}`, "result"},
		{"result not an object", "hooks/after-tool", `{"call":{},"result":[1]}`, "result"},
		{"no content", "hooks/after-tool", `{"call":{},"result":{"isError":false}}`, "result.content"},
		{"content a number", "hooks/after-tool", `{"call":{},"result":{"content":5}}`, "result.content"},
		{"block without type", "hooks/after-tool", `{"call":{},"result":{"content":[{"text":"x"}]}}`, "result.content[0].type"},
		{"block not an object", "hooks/after-tool", `{"call":{},"result":{"content":["x"]}}`, "result.content[0]"},
		{"bound of zero", "hooks/after-tool", `{"call":{},"result":{"content":[]},"bounds":{"maxBytes":0}}`, "bounds.maxBytes"},
		{"negative line bound", "hooks/after-tool", `{"call":{},"result":{"content":[]},"bounds":{"maxLines":-1}}`, "bounds.maxLines"},
		{"no message", "hooks/offload-input", `{}`, "message"},
		{"message without role", "hooks/offload-input", `{"message":{"content":[]}}`, "message.role"},
		{"message without content", "hooks/offload-input", `{"message":{"role":"user"}}`, "message.content"},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				status, out := e.post(t, tenantA, c.route, []byte(c.body))
				wantError(t, status, out, http.StatusBadRequest, c.field)
			})
		}
	})
}

// TestHookBodiesNotUTF8AreRefusedNamingTheString: a hook answers the
// request it was sent, images moved, as JSON; bytes that are not UTF-8 are
// no JSON text, so the request is refused with a 400 naming the string
// that holds them, and nothing of it is stored.
func TestHookBodiesNotUTF8AreRefusedNamingTheString(t *testing.T) {
	good := pngB64(t, 12, 8, 8)
	cases := []struct {
		name, route, body, field string
	}{
		{"a tool result's text", "hooks/after-tool",
			`{"call":{"name":"t"},"result":{"content":[{"type":"image","mimeType":"image/png","data":"` + good + "\"},{\"type\":\"text\",\"text\":\"bad \xff\xfe x\"}]}}", "result.content[1].text"},
		{"a tool result's details", "hooks/after-tool",
			`{"call":{"name":"t"},"result":{"content":[{"type":"image","mimeType":"image/png","data":"` + good + "\"}],\"details\":{\"path\":\"\xc3(\"}}}", "result.details.path"},
		{"a user message's text", "hooks/offload-input",
			`{"message":{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"` + good + "\"},{\"type\":\"text\",\"text\":\"\xed\xa0\x80\"}]}}", "message.content[1].text"},
		{"a pi request", "hooks/before-request",
			"{\"format\":\"pi\",\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\"}]}}", "request.messages[0].content"},
		{"an Anthropic request's system prompt", "hooks/before-request",
			"{\"format\":\"anthropic\",\"request\":{\"system\":\"\xfe\",\"messages\":[]}}", "request.system"},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := e.blobs.puts.Load()
				status, out := e.post(t, tenantA, c.route, []byte(c.body))
				if msg := wantError(t, status, out, http.StatusBadRequest, c.field); !strings.Contains(msg, "not UTF-8") {
					t.Errorf("message %q does not say what is wrong", msg)
				}
				if e.blobs.puts.Load() != before {
					t.Fatal("an image was stored from a refused request")
				}
			})
		}
		if e.stored(t, tenantA, images.Name(good)) {
			t.Fatal("the image of a refused request was stored")
		}
	})
}

// The hooks hold a request's fields as slices of its body (rawjson.Value),
// which is sound only while api.DecodeJSON gives every request a body
// buffer of its own (that json.Unmarshal hands values over as slices of its
// input is rawjson's TestValueIsASliceOfTheInput).
func TestBodyValuesAreSlicesOfTheBody(t *testing.T) {
	t.Run("every request has a body of its own", func(t *testing.T) {
		decode := func(body string) map[string]rawjson.Value {
			var got struct{ Result map[string]rawjson.Value }
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			if err := api.DecodeJSON(r, &got); err != nil {
				t.Fatal(err)
			}
			return got.Result
		}
		first := decode(`{"result":{"content":"aaaa","isError":false}}`)
		for range 100 {
			decode(`{"result":{"content":"bbbb","isError":true}}`)
		}
		if string(first["content"]) != `"aaaa"` || string(first["isError"]) != "false" {
			t.Fatalf("a later request overwrote the first one's fields: %s", rawjson.Encode(&rawjson.Object{Fields: first}))
		}
	})
}

// TestSplitBodyDecodesAsReadHook: after-tool's one-pass decoding gives
// what decoding the whole body with encoding/json gives, the same request
// or the same 400, whatever the body's shape.
func TestSplitBodyDecodesAsReadHook(t *testing.T) {
	for _, body := range []string{
		`{"call":{"id":"c","name":"n"},"result":{"content":[{"type":"text","text":"x"}]}}`,
		` { "Result" : {"content":"s"} , "call" : {"id":"c"} } `,
		`{"result":{"a":1},"RESULT":{"b":2}}`,
		`{"result":{"a":1},"result":null}`,
		`{"result":{},"call":{"id":"c"}}`,
		`{"result":7,"call":{"id":"c"}}`,
		`{"call":{"id":7},"result":{}}`,
		`{"result":{},"call":{"id":7},"bounds":{"maxBytes":"x"}}`,
		`{"call":{"id":"c\u00e9\"","nested":true},"res\u0075lt":{"content":[]},"other":[1,{"x":"}"}]}`,
		`null`, `[]`, `"x"`, `{"result":{"a":1}`, `{"result":{"a":1}} x`,
	} {
		checkSplitDecodesAsReadHook(t, "after-tool", body, func(r *http.Request, req *afterToolRequest) error {
			_, _, err := readHookHolding(r, req, "result", &req.Result)
			return err
		}, func(got, want afterToolRequest) string { return "" })
	}
}

// TestSplitBeforeRequestBodyDecodesAsReadHook: before-request's one-pass
// decoding gives what decoding the whole body with encoding/json gives, the
// same fields and request, byte for byte, or the same 400.
func TestSplitBeforeRequestBodyDecodesAsReadHook(t *testing.T) {
	for _, body := range []string{
		`{"format":"anthropic","request":{"messages":[{"role":"user","content":"[image 0123456789abcdef]"}]}}`,
		` { "Request" : {"messages":[]} , "format" : "pi", "mode":"url", "budgetBytes": 10 } `,
		`{"request":{"a":1},"REQUEST":[2]}`,
		`{"request":{"a":1},"request":null}`,
		`{"request":"s","format":7}`,
		`{"format":"pi","budgetBytes":"x","request":{}}`,
		`{"format":"pi"}`,
		`{"format":"p\u0069\"","nested":true,"r\u0065quest":{"messages":[]},"other":[1,{"x":"}"}]}`,
		`null`, `[]`, `"x"`, `{"request":{"a":1}`, `{"request":{"a":1}} x`,
	} {
		checkSplitDecodesAsReadHook(t, "before-request", body, func(r *http.Request, req *beforeRequestBody) error {
			_, _, err := readHookRaw(r, req, "request", &req.Request)
			return err
		}, func(got, want beforeRequestBody) string {
			if string(got.Request) != string(want.Request) {
				return fmt.Sprintf("request %s, want %s", got.Request, want.Request)
			}
			return ""
		})
	}
}

// checkSplitDecodesAsReadHook posts body to the hook and checks that split,
// a hook's one-pass decoding, gives what readHook gives: the same error,
// or the same fields as JSON and nothing that differs (what differs
// names, beyond the fields' JSON).
func checkSplitDecodesAsReadHook[T any](t *testing.T, hook, body string, split func(*http.Request, *T) error, differs func(got, want T) string) {
	t.Helper()
	decode := func(split func(*http.Request, *T) error) (T, error) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chats/c/hooks/"+hook, strings.NewReader(body))
		r = r.WithContext(api.WithTenant(r.Context(), tenantA))
		r.SetPathValue("chat", "c")
		var req T
		return req, split(r, &req)
	}
	want, wantErr := decode(func(r *http.Request, req *T) error {
		_, _, err := readHook(r, req)
		return err
	})
	got, err := decode(split)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Errorf("%s: error %v, want %v", body, err, wantErr)
		return
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: decoded %s, want %s", body, g, w)
	}
	if d := differs(got, want); d != "" {
		t.Errorf("%s: decoded %s", body, d)
	}
}
