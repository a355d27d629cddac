package hooks

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
)

type restoreAnswerT struct {
	Request              json.RawMessage
	Restored             []string
	Unrestored           []Unrestored
	UnrestoredOmitted    int
	InlineBytes          int64
	Images               int
	EstimatedImageTokens int
}

func restoreBody(format string, req any) obj { return obj{"format": format, "request": req} }

// fixtureImages stores two small PNGs for tenant A.
func fixtureImages(t *testing.T, e *env) (a, b, na, nb string) {
	a, b = pngB64(t, 21, 8, 8), pngB64(t, 22, 8, 8)
	return a, b, e.put(t, tenantA, a), e.put(t, tenantA, b)
}

func TestExactRefBlocksBecomeImages(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, b, na, nb := fixtureImages(t, e)
		ra, rb := refs.Ref(na), refs.Ref(nb)
		mention := "as " + ra + " shows"
		type pick func(ref, image any) any
		cases := []struct {
			format     string
			build      func(p pick) obj
			unrestored []Unrestored
		}{
			{FormatPi, func(p pick) obj {
				return obj{"systemPrompt": "s " + ra, "tools": list{}, "messages": list{
					obj{"role": "user", "timestamp": 1, "content": list{textBlock("look"), p(textBlock(ra), obj{"type": "image", "data": a, "mimeType": "image/png", "name": na}), textBlock(mention), textBlock(ra + "\n")}},
					obj{"role": "assistant", "content": list{textBlock(ra)}, "usage": obj{"input": 1}},
					obj{"role": "toolResult", "toolCallId": "c1", "toolName": "shot", "isError": false, "content": list{p(textBlock(rb), obj{"type": "image", "data": b, "mimeType": "image/png", "name": nb})}},
					obj{"role": "user", "content": p(ra, list{obj{"type": "image", "data": a, "mimeType": "image/png", "name": na}})},
				}}
			}, nil},
			{FormatAnthropic, func(p pick) obj {
				cc := obj{"type": "ephemeral"}
				img := func(d string) obj {
					return obj{"type": "image", "source": obj{"type": "base64", "media_type": "image/png", "data": d}}
				}
				withCC := img(a)
				withCC["cache_control"] = cc
				return obj{"model": "m", "max_tokens": 10, "system": "s " + ra, "messages": list{
					obj{"role": "user", "content": list{textBlock("look"), p(obj{"type": "text", "text": ra, "cache_control": cc}, withCC), textBlock(mention), textBlock(ra + "\n")}},
					obj{"role": "assistant", "content": list{obj{"type": "tool_use", "id": "t1", "name": "shot", "input": obj{}}, textBlock(ra)}},
					obj{"role": "user", "content": list{
						obj{"type": "tool_result", "tool_use_id": "t1", "is_error": false, "content": list{textBlock("shot:"), p(textBlock(rb), img(b))}},
						obj{"type": "tool_result", "tool_use_id": "t2", "content": p(rb, list{img(b)})},
					}},
					obj{"role": "user", "content": p(ra, list{img(a)})},
				}}
			}, nil},
			{FormatBedrock, func(p pick) obj {
				img := func(d string) obj { return obj{"image": obj{"format": "png", "source": obj{"bytes": d}}} }
				return obj{"modelId": "m", "system": list{obj{"text": "s " + ra}}, "inferenceConfig": obj{"maxTokens": 10}, "messages": list{
					obj{"role": "user", "content": list{obj{"text": "look"}, p(obj{"text": ra}, img(a)), obj{"text": mention}, obj{"text": ra + "\n"}}},
					obj{"role": "assistant", "content": list{obj{"toolUse": obj{"toolUseId": "t1", "name": "shot", "input": obj{}}}, obj{"text": ra}}},
					obj{"role": "user", "content": list{obj{"toolResult": obj{"toolUseId": "t1", "status": "success", "content": list{obj{"json": obj{"k": 1}}, p(obj{"text": rb}, img(b))}}}}},
				}}
			}, nil},
			{FormatOpenAI, func(p pick) obj {
				img := func(d string) obj {
					return obj{"type": "image_url", "image_url": obj{"url": "data:image/png;base64," + d}}
				}
				return obj{"model": "m", "temperature": 0.2, "messages": list{
					obj{"role": "system", "content": "s " + ra},
					obj{"role": "user", "content": list{textBlock("look"), p(textBlock(ra), img(a)), textBlock(mention), textBlock(ra + "\n")}},
					obj{"role": "assistant", "content": ra, "tool_calls": list{obj{"id": "t1", "type": "function", "function": obj{"name": "shot", "arguments": "{}"}}}},
					obj{"role": "tool", "tool_call_id": "t1", "content": rb},
					obj{"role": "tool", "tool_call_id": "t2", "content": list{textBlock(rb)}},
					obj{"role": "user", "content": p(ra, list{img(a)})},
				}}
			}, []Unrestored{{Name: nb, Reason: ReasonFormat}}},
		}
		for _, c := range cases {
			t.Run(c.format, func(t *testing.T) {
				req := c.build(func(ref, _ any) any { return ref })
				want := c.build(func(_, image any) any { return image })
				var got restoreAnswerT
				e.postOK(t, tenantA, "hooks/before-request", restoreBody(c.format, req), &got)
				wantJSON, _ := json.Marshal(want)
				if !jsonEqual(t, got.Request, wantJSON) {
					t.Fatalf("restored request:\n got %s\nwant %s", got.Request, wantJSON)
				}
				wantRestored := []string{na, nb}
				if c.unrestored != nil {
					wantRestored = []string{na}
				}
				if !slices.Equal(got.Restored, wantRestored) {
					t.Errorf("restored %v, want %v", got.Restored, wantRestored)
				}
				if !slices.Equal(got.Unrestored, c.unrestored) && !(len(got.Unrestored) == 0 && c.unrestored == nil) {
					t.Errorf("unrestored %v, want %v", got.Unrestored, c.unrestored)
				}
			})
		}
	})
}

func TestRefWithTrailingNewlineIsNotARef(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		_, _, na, _ := fixtureImages(t, e)
		for _, text := range []string{refs.Ref(na) + "\n", refs.Ref(na) + " ", " " + refs.Ref(na), "\n" + refs.Ref(na)} {
			req := obj{"messages": list{obj{"role": "user", "content": list{textBlock(text)}}}}
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", restoreBody(FormatPi, req), &got)
			wantJSON, _ := json.Marshal(req)
			if !jsonEqual(t, got.Request, wantJSON) || len(got.Restored) != 0 {
				t.Fatalf("%q was restored: %s", text, got.Request)
			}
		}
		if n := e.blobs.gets.Load(); n != 0 {
			t.Fatalf("%d reads for text that holds no ref block", n)
		}
	})
}

func TestEachImageIsReadOnceAndOnlyRefsOfTheRequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		var names []string
		for i := range 7 {
			names = append(names, e.put(t, tenantA, pngB64(t, 30+i, 8, 8)))
		}
		// names[5] was in a message a refresh dropped: the request only
		// mentions it in text. names[6] is only in an assistant message.
		var content list
		for i := range 20 {
			content = append(content, textBlock(refs.Ref(names[i%5])))
		}
		req := obj{"messages": list{
			obj{"role": "user", "content": content[:10]},
			obj{"role": "assistant", "content": list{textBlock(refs.Ref(names[6]))}},
			obj{"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": append(content[10:], textBlock("earlier: "+refs.Ref(names[5])))},
		}}
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", restoreBody(FormatPi, req), &got)
		if !slices.Equal(got.Restored, names[:5]) {
			t.Fatalf("restored %v", got.Restored)
		}
		read := e.blobs.keysRead()
		if len(read) != 5 {
			t.Fatalf("%d reads for 5 distinct images: %v", len(read), read)
		}
		for _, key := range read {
			if keyHasName(names[5])(key) || keyHasName(names[6])(key) {
				t.Fatalf("read %s, which no ref block of the request names", key)
			}
		}
	})
}

func TestRestoreNeverFailsTheRequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, _, na, nb := fixtureImages(t, e)
		unknown := "fedcba9876543210"
		e.blobs.set(func(f *faultyBlobs) { f.failGet = keyHasName(nb) })
		for _, format := range []string{FormatPi, FormatAnthropic} {
			req := obj{"messages": list{obj{"role": "user", "content": list{
				textBlock(refs.Ref(unknown)), textBlock(refs.Ref(nb)), textBlock(refs.Ref(na)),
			}}}}
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", restoreBody(format, req), &got)
			want := []Unrestored{{Name: unknown, Reason: ReasonNotFound}, {Name: nb, Reason: ReasonUnavailable}}
			if !slices.Equal(got.Unrestored, want) || !slices.Equal(got.Restored, []string{na}) {
				t.Fatalf("%s: restored %v unrestored %v", format, got.Restored, got.Unrestored)
			}
			var r struct {
				Messages []struct{ Content []map[string]any }
			}
			json.Unmarshal(got.Request, &r)
			c := r.Messages[0].Content
			if c[0]["text"] != refs.Ref(unknown) || c[1]["text"] != refs.Ref(nb) || c[2]["type"] != "image" {
				t.Fatalf("%s: content %v", format, c)
			}
			if format == FormatPi && c[2]["data"] != a {
				t.Fatal("wrong bytes restored")
			}
		}
	})
}

func TestOtherTenantsImageIsNotRestored(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		theirs := e.put(t, tenantB, pngB64(t, 40, 8, 8))
		req := obj{"messages": list{obj{"role": "user", "content": refs.Ref(theirs)}}}
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", restoreBody(FormatAnthropic, req), &got)
		if len(got.Restored) != 0 || !slices.Equal(got.Unrestored, []Unrestored{{Name: theirs, Reason: ReasonNotFound}}) {
			t.Fatalf("restored %v unrestored %v", got.Restored, got.Unrestored)
		}
		if strings.Contains(string(got.Request), "base64") {
			t.Fatalf("another tenant's image was sent: %s", got.Request)
		}
		// Its owner gets it.
		e.postOK(t, tenantB, "hooks/before-request", restoreBody(FormatAnthropic, req), &got)
		if !slices.Equal(got.Restored, []string{theirs}) {
			t.Fatalf("the owner's restore: %v %v", got.Restored, got.Unrestored)
		}
	})
}

// fetchLink gets a link restore handed out and checks it serves want.
func fetchLink(t *testing.T, url string, want []byte) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(got) != string(want) {
		t.Fatalf("link %s: status %d, %d bytes, want %d", url, res.StatusCode, len(got), len(want))
	}
}

func TestInlineBudgetSendsTheRestAsLinksOrText(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		small1, big, small2 := pngB64(t, 50, 8, 8), pngB64(t, 51, 64, 64), pngB64(t, 52, 8, 8)
		n1, nb, n2 := e.put(t, tenantA, small1), e.put(t, tenantA, big), e.put(t, tenantA, small2)
		// The budget holds both small ones but not the big one between
		// them. It is spent newest first and closes at the big one, so the
		// newest (small2) is inline and the oldest (small1) is not.
		budget := len(small1) + len(small2) + 10
		content := list{textBlock(refs.Ref(n1)), textBlock(refs.Ref(nb)), textBlock(refs.Ref(n2))}

		t.Run("anthropic links", func(t *testing.T) {
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatAnthropic, "budgetBytes": budget,
				"request": obj{"messages": list{obj{"role": "user", "content": content}}}}, &got)
			var r struct {
				Messages []struct {
					Content []struct {
						Type   string
						Source struct{ Type, URL, Data string }
					}
				}
			}
			json.Unmarshal(got.Request, &r)
			c := r.Messages[0].Content
			if c[0].Source.Type != "url" || c[1].Source.Type != "url" || c[2].Source.Type != "base64" {
				t.Fatalf("sources %+v", c)
			}
			if got.InlineBytes != int64(len(small2)) || len(got.Restored) != 3 || len(got.Unrestored) != 0 {
				t.Fatalf("inline bytes %d restored %v unrestored %v", got.InlineBytes, got.Restored, got.Unrestored)
			}
			bigBytes, _ := base64.StdEncoding.DecodeString(big)
			fetchLink(t, c[1].Source.URL, bigBytes)
		})
		t.Run("openai links", func(t *testing.T) {
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatOpenAI, "budgetBytes": 0,
				"request": obj{"messages": list{obj{"role": "user", "content": content}}}}, &got)
			var r struct {
				Messages []struct {
					Content []struct {
						Type     string
						ImageURL struct{ URL string } `json:"image_url"`
					}
				}
			}
			json.Unmarshal(got.Request, &r)
			for _, p := range r.Messages[0].Content {
				if p.Type != "image_url" || !strings.HasPrefix(p.ImageURL.URL, "http") {
					t.Fatalf("part %+v is not a link", p)
				}
			}
		})
		t.Run("bedrock keeps refs past the budget", func(t *testing.T) {
			var got restoreAnswerT
			bedrockContent := list{obj{"text": refs.Ref(n1)}, obj{"text": refs.Ref(nb)}, obj{"text": refs.Ref(n2)}}
			e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatBedrock, "budgetBytes": budget,
				"request": obj{"messages": list{obj{"role": "user", "content": bedrockContent}}}}, &got)
			want := []Unrestored{{Name: n1, Reason: ReasonBudget}, {Name: nb, Reason: ReasonBudget}}
			if !slices.Equal(got.Unrestored, want) || !slices.Equal(got.Restored, []string{n2}) {
				t.Fatalf("restored %v unrestored %v", got.Restored, got.Unrestored)
			}
		})
		t.Run("url mode links every image", func(t *testing.T) {
			gets := e.blobs.gets.Load()
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatAnthropic, "mode": ModeURL,
				"request": obj{"messages": list{obj{"role": "user", "content": content}}}}, &got)
			if strings.Contains(string(got.Request), `"base64"`) || got.InlineBytes != 0 || len(got.Restored) != 3 {
				t.Fatalf("url mode: %s", got.Request)
			}
			if e.blobs.gets.Load() != gets {
				t.Fatal("url mode read image bytes")
			}
		})
		t.Run("url mode on a format without links inlines within the budget", func(t *testing.T) {
			var got restoreAnswerT
			e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatPi, "mode": ModeURL,
				"request": obj{"messages": list{obj{"role": "user", "content": content}}}}, &got)
			if len(got.Restored) != 3 || got.InlineBytes != int64(len(small1)+len(big)+len(small2)) {
				t.Fatalf("restored %v, %d bytes", got.Restored, got.InlineBytes)
			}
		})
	})
}

func TestRefsCountAsImagesInTheTokenEstimate(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		_, _, na, nb := fixtureImages(t, e)
		req := obj{"messages": list{
			obj{"role": "user", "content": list{
				textBlock(refs.Ref(na)), textBlock(refs.Ref(nb)), textBlock(refs.Ref("0000000000000000")),
				imageBlock(pngB64(t, 60, 8, 8)),
			}},
		}}
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", restoreBody(FormatPi, req), &got)
		if got.Images != 4 {
			t.Fatalf("images %d, want 4 (2 restored, 1 ref left as text, 1 already inline)", got.Images)
		}
		want := 2*imageTokens(8, 8) + 2*imageTokens(0, 0)
		if got.EstimatedImageTokens != want {
			t.Fatalf("estimated %d tokens, want %d", got.EstimatedImageTokens, want)
		}
	})
}

func TestImageTokens(t *testing.T) {
	cases := []struct{ w, h, want int }{
		{0, 0, 1600},
		{8, 8, 1},
		{1000, 1000, 1334}, // 1,000,000 / 750, rounded up
		{1092, 1092, 1590},
		{4000, 3000, 1600},
		{200, 100, 27},
	}
	for _, c := range cases {
		if got := imageTokens(c.w, c.h); got != min(c.want, 1600) {
			t.Errorf("imageTokens(%d, %d) = %d, want %d", c.w, c.h, got, min(c.want, 1600))
		}
	}
}

func TestRestoredZoomImageKeepsItsStoredKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		name := e.put(t, tenantA, pngB64(t, 70, 2100, 30)) // shrunk when stored
		zoomed, err := e.images.Get(t.Context(), tenantA, name)
		if err != nil {
			t.Fatal(err)
		}
		// The zoom result goes through after-tool, is kept with its ref,
		// and is restored into the next request.
		var offloaded afterToolAnswerT
		e.postOK(t, tenantA, "hooks/after-tool", afterTool(obj{"name": "zoom"}, list{
			textBlock("0: " + refs.Ref(name)),
			obj{"type": "image", "data": base64.StdEncoding.EncodeToString(zoomed.Data), "mimeType": zoomed.MimeType, "name": name},
		}), &offloaded)
		content := []any{}
		for _, b := range offloaded.Result.Content {
			content = append(content, b)
		}
		req := obj{"messages": list{obj{"role": "toolResult", "toolCallId": "z", "toolName": "zoom", "content": content}}}
		var restored restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", restoreBody(FormatPi, req), &restored)
		var r struct {
			Messages []struct{ Content []map[string]any }
		}
		json.Unmarshal(restored.Request, &r)
		img := r.Messages[0].Content[1]
		if img["type"] != "image" || img["name"] != name {
			t.Fatalf("restored block %v does not carry its stored name", img)
		}
		// A host that offloads the restored message again gets the same key.
		puts := e.blobs.puts.Load()
		var again struct{ Stored []string }
		e.postOK(t, tenantA, "hooks/offload-input", obj{"message": obj{"role": "user", "content": list{img}}}, &again)
		if !slices.Equal(again.Stored, []string{name}) || e.blobs.puts.Load() != puts {
			t.Fatalf("offloading the restored image gave %v (%d puts)", again.Stored, e.blobs.puts.Load()-puts)
		}
		if e.stored(t, tenantA, images.Name(img["data"].(string))) {
			t.Fatal("a second key was made")
		}
	})
}

func TestUntouchedFieldsPassThroughByteForByte(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		_, _, na, _ := fixtureImages(t, e)
		untouched := `{"role":"assistant","content":[{"type":"text","text":"<b>&amp;</b>","citations":null}],"x":1.50}`
		req := `{"model":"claude","max_tokens":1024,"metadata":{"user_id":"u"},"stop_sequences":["\u0000"],"thinking":{"type":"enabled","budget_tokens":2048},` +
			`"messages":[` + untouched + `,{"role":"user","content":[{"type":"text","text":"` + refs.Ref(na) + `"}],"future_field":{"a":[]}}]}`
		status, out := e.post(t, tenantA, "hooks/before-request", []byte(`{"format":"anthropic","request":`+req+`}`))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, out)
		}
		var got struct{ Request map[string]json.RawMessage }
		json.Unmarshal(out, &got)
		var in map[string]json.RawMessage
		json.Unmarshal([]byte(req), &in)
		for k, v := range in {
			if k == "messages" {
				continue
			}
			if string(got.Request[k]) != string(v) {
				t.Errorf("field %s: got %s, want %s", k, got.Request[k], v)
			}
		}
		var msgs []json.RawMessage
		json.Unmarshal(got.Request["messages"], &msgs)
		if string(msgs[0]) != untouched {
			t.Errorf("untouched message changed:\n got %s\nwant %s", msgs[0], untouched)
		}
		var user map[string]json.RawMessage
		json.Unmarshal(msgs[1], &user)
		if string(user["future_field"]) != `{"a":[]}` {
			t.Errorf("unknown message field: %s", user["future_field"])
		}
	})
}

func TestMalformedProviderRequestsNameTheField(t *testing.T) {
	cases := []struct {
		name, body, field string
	}{
		{"not JSON", `{"format":"pi","request":{`, ""},
		{"unknown format", `{"format":"gemini","request":{"messages":[]}}`, "format"},
		{"no format", `{"request":{"messages":[]}}`, "format"},
		{"unknown mode", `{"format":"pi","mode":"fast","request":{"messages":[]}}`, "mode"},
		{"negative budget", `{"format":"pi","budgetBytes":-1,"request":{"messages":[]}}`, "budgetBytes"},
		{"no request", `{"format":"pi"}`, "request"},
		{"request not an object", `{"format":"anthropic","request":[]}`, "request"},
		{"no messages", `{"format":"openai","request":{"model":"m"}}`, "request.messages"},
		{"messages not a list", `{"format":"bedrock","request":{"messages":{}}}`, "request.messages"},
		{"message not an object", `{"format":"pi","request":{"messages":[1]}}`, "request.messages[0]"},
		{"message without role", `{"format":"anthropic","request":{"messages":[{"content":"x"}]}}`, "request.messages[0].role"},
		{"anthropic system role", `{"format":"anthropic","request":{"messages":[{"role":"system","content":"x"}]}}`, "request.messages[0].role"},
		{"openai unknown role", `{"format":"openai","request":{"messages":[{"role":"robot","content":"x"}]}}`, "request.messages[0].role"},
		{"pi content a number", `{"format":"pi","request":{"messages":[{"role":"user","content":5}]}}`, "request.messages[0].content"},
		{"block without type", `{"format":"anthropic","request":{"messages":[{"role":"user","content":[{"text":"x"}]}]}}`, "request.messages[0].content[0].type"},
		{"text not a string", `{"format":"openai","request":{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}}`, "request.messages[0].content[0].text"},
		{"tool_result content a number", `{"format":"anthropic","request":{"messages":[{"role":"user","content":[{"type":"tool_result","content":1}]}]}}`, "request.messages[0].content[0].content"},
		{"bedrock content a string", `{"format":"bedrock","request":{"messages":[{"role":"user","content":"x"}]}}`, "request.messages[0].content"},
		{"bedrock tool result not an object", `{"format":"bedrock","request":{"messages":[{"role":"user","content":[{"toolResult":[]}]}]}}`, "request.messages[0].content[0].toolResult"},
		{"bedrock text a number", `{"format":"bedrock","request":{"messages":[{"role":"user","content":[{"text":2}]}]}}`, "request.messages[0].content[0].text"},
	}
	eachBackend(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				status, out := e.post(t, tenantA, "hooks/before-request", []byte(c.body))
				wantError(t, status, out, http.StatusBadRequest, c.field)
			})
		}
	})
}

// Without budgetBytes, the budget leaves room for the request itself: the
// answer, inside the Lambda response (where the request's quotes are
// escaped again; lambdahttp leaves <, > and & as they are), stays under
// Lambda's 6 MB however large the request.
func TestDefaultBudgetKeepsTheAnswerUnderLambdasLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		var names []string
		for seed := range 3 {
			// About 1.44 MB of base64 each: all three fit DefaultBudget.
			names = append(names, e.put(t, tenantA, base64.StdEncoding.EncodeToString(pngBytes(t, 70+seed, 600, 600, true))))
		}
		for _, tc := range []struct{ name, text string }{
			{"plain text", strings.Repeat("a", 2_500_000)},
			{"text that escapes", strings.Repeat(`"`, 700_000)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				content := list{textBlock(tc.text)}
				for _, n := range names {
					content = append(content, textBlock(refs.Ref(n)))
				}
				// Sent as a host would, without escaping <, > and &.
				body, err := api.Marshal(restoreBody(FormatPi, obj{"messages": list{obj{"role": "user", "content": content}}}))
				if err != nil {
					t.Fatal(err)
				}
				status, out := e.post(t, tenantA, "hooks/before-request", []byte(body))
				if status != http.StatusOK {
					t.Fatalf("status %d: %.300s", status, out)
				}
				// The body as Lambda's response carries it (lambdahttp.Start).
				var envelope bytes.Buffer
				enc := json.NewEncoder(&envelope)
				enc.SetEscapeHTML(false)
				enc.Encode(string(out))
				if envelope.Len() > 6_000_000 {
					t.Fatalf("the answer is %d bytes inside a Lambda response, over 6 MB", envelope.Len())
				}
				var got restoreAnswerT
				json.Unmarshal(out, &got)
				if !slices.Equal(got.Restored, names[1:]) || !slices.Equal(got.Unrestored, []Unrestored{{Name: names[0], Reason: ReasonBudget}}) {
					t.Fatalf("restored %v unrestored %v", got.Restored, got.Unrestored)
				}
			})
		}
	})
}
