package hooks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// describedAnswer is a before-request answer with its description counts.
type describedAnswer struct {
	restoreAnswerT
	Described           int
	PendingDescriptions int
}

// describedImages stores, for tenant A: a and b with descriptions, c
// without one (pending), and a description for gone, whose image is not
// stored (or was deleted) but which the chat names.
func describedImages(t *testing.T, e *env) (na, nb, nc, gone string) {
	t.Helper()
	ctx := context.Background()
	_, _, na, nb = fixtureImages(t, e)
	nc = e.put(t, tenantA, pngB64(t, 23, 8, 8))
	gone = "0123456789abcdef"
	e.hold(t, tenantA, "chat-1", gone)
	for name, d := range map[string]string{na: "a login page with a red banner \"Invalid token\"", nb: "a terminal <stack trace> & exit 1", gone: "a chart of weekly sales"} {
		if err := e.images.PutDescription(ctx, tenantA, name, d); err != nil {
			t.Fatal(err)
		}
	}
	return na, nb, nc, gone
}

func TestRefsLeftAsTextCarryTheirDescription(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		na, nb, nc, gone := describedImages(t, e)
		ra, rb, rc, rg := refs.Ref(na), refs.Ref(nb), refs.Ref(nc), refs.Ref(gone)
		da := DescribedRef(na, `a login page with a red banner "Invalid token"`)
		db := DescribedRef(nb, "a terminal <stack trace> & exit 1")
		dg := DescribedRef(gone, "a chart of weekly sales")
		mention := "as " + ra + " shows"
		budget0 := int64(0)
		cases := []struct {
			name       string
			format     string
			budget     *int64
			req, want  obj
			unrestored []Unrestored
			described  int
			pending    int
			// failImage: reads of this image (not its description) fail.
			failImage string
		}{
			{"budget", FormatPi, &budget0,
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(ra), textBlock(mention), textBlock(rc)}}, obj{"role": "toolResult", "content": rb}}},
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(da), textBlock(mention), textBlock(rc)}}, obj{"role": "toolResult", "content": db}}},
				[]Unrestored{{Name: na, Reason: ReasonBudget}, {Name: nc, Reason: ReasonBudget}, {Name: nb, Reason: ReasonBudget}}, 2, 1, ""},
			{"budget, bedrock", FormatBedrock, &budget0,
				obj{"messages": list{obj{"role": "user", "content": list{obj{"text": ra}, obj{"toolResult": obj{"toolUseId": "t", "content": list{obj{"text": rb}}}}}}}},
				obj{"messages": list{obj{"role": "user", "content": list{obj{"text": da}, obj{"toolResult": obj{"toolUseId": "t", "content": list{obj{"text": db}}}}}}}},
				[]Unrestored{{Name: na, Reason: ReasonBudget}, {Name: nb, Reason: ReasonBudget}}, 2, 0, ""},
			{"format: an OpenAI tool message", FormatOpenAI, nil,
				obj{"messages": list{obj{"role": "tool", "tool_call_id": "t", "content": ra}, obj{"role": "tool", "tool_call_id": "u", "content": list{textBlock(rb), textBlock(mention)}}}},
				obj{"messages": list{obj{"role": "tool", "tool_call_id": "t", "content": da}, obj{"role": "tool", "tool_call_id": "u", "content": list{textBlock(db), textBlock(mention)}}}},
				[]Unrestored{{Name: na, Reason: ReasonFormat}, {Name: nb, Reason: ReasonFormat}}, 2, 0, ""},
			{"not found: the image is gone, its description stays", FormatAnthropic, nil,
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(rg), obj{"type": "tool_result", "tool_use_id": "t", "content": rg}}}}},
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(dg), obj{"type": "tool_result", "tool_use_id": "t", "content": dg}}}}},
				[]Unrestored{{Name: gone, Reason: ReasonNotFound}}, 2, 0, ""},
			{"unavailable: the image read fails, its description does not", FormatPi, nil,
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(ra)}}}},
				obj{"messages": list{obj{"role": "user", "content": list{textBlock(da)}}}},
				[]Unrestored{{Name: na, Reason: ReasonUnavailable}}, 1, 0, store.ImageKey(tenantA, na)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.blobs.mu.Lock()
				e.blobs.failGet = func(key string) bool { return key == c.failImage }
				e.blobs.mu.Unlock()
				body := restoreBody(c.format, c.req)
				if c.budget != nil {
					body["budgetBytes"] = *c.budget
				}
				var got describedAnswer
				e.postOK(t, tenantA, "hooks/before-request", body, &got)
				wantJSON, _ := json.Marshal(c.want)
				if !jsonEqual(t, got.Request, wantJSON) {
					t.Fatalf("request:\n got %s\nwant %s", got.Request, wantJSON)
				}
				if !slices.Equal(got.Unrestored, c.unrestored) || got.Described != c.described || got.PendingDescriptions != c.pending {
					t.Fatalf("unrestored %v, described %d, pending %d; want %v, %d, %d",
						got.Unrestored, got.Described, got.PendingDescriptions, c.unrestored, c.described, c.pending)
				}
			})
		}
	})
}

func TestDescribeModeSendsEveryImageAsItsDescription(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		na, _, nc, _ := describedImages(t, e)
		ra, rc := refs.Ref(na), refs.Ref(nc)
		da := DescribedRef(na, `a login page with a red banner "Invalid token"`)
		mention := "see " + ra
		// Each format's request, with p choosing between a ref and what
		// describe mode makes of it.
		cases := []struct {
			format string
			build  func(p func(ref, described string) string) obj
		}{
			{FormatPi, func(p func(string, string) string) obj {
				return obj{"messages": list{
					obj{"role": "user", "content": list{textBlock(p(ra, da)), textBlock(mention)}},
					obj{"role": "toolResult", "toolCallId": "c", "content": list{textBlock(p(rc, rc))}},
					obj{"role": "user", "content": p(ra, da)},
				}}
			}},
			{FormatAnthropic, func(p func(string, string) string) obj {
				return obj{"messages": list{
					obj{"role": "user", "content": list{textBlock(p(ra, da)), textBlock(mention),
						obj{"type": "tool_result", "tool_use_id": "t", "content": list{textBlock(p(rc, rc))}}}},
				}}
			}},
			{FormatBedrock, func(p func(string, string) string) obj {
				return obj{"messages": list{
					obj{"role": "user", "content": list{obj{"text": p(ra, da)}, obj{"text": mention},
						obj{"toolResult": obj{"toolUseId": "t", "content": list{obj{"text": p(rc, rc)}}}}}},
				}}
			}},
			{FormatOpenAI, func(p func(string, string) string) obj {
				return obj{"messages": list{
					obj{"role": "user", "content": list{textBlock(p(ra, da)), textBlock(mention)}},
					obj{"role": "tool", "tool_call_id": "t", "content": p(rc, rc)},
				}}
			}},
		}
		for _, c := range cases {
			t.Run(c.format, func(t *testing.T) {
				e.blobs.mu.Lock()
				e.blobs.got = nil
				e.blobs.mu.Unlock()
				body := restoreBody(c.format, c.build(func(ref, _ string) string { return ref }))
				body["mode"] = ModeDescribe
				var got describedAnswer
				e.postOK(t, tenantA, "hooks/before-request", body, &got)
				wantJSON, _ := json.Marshal(c.build(func(_, described string) string { return described }))
				if !jsonEqual(t, got.Request, wantJSON) {
					t.Fatalf("request:\n got %s\nwant %s", got.Request, wantJSON)
				}
				want := []Unrestored{{Name: na, Reason: ReasonDescribe}, {Name: nc, Reason: ReasonDescribe}}
				if !slices.Equal(got.Unrestored, want) || len(got.Restored) != 0 || got.PendingDescriptions != 1 || got.InlineBytes != 0 || got.Images != 0 {
					t.Fatalf("answer %+v", got)
				}
				e.blobs.mu.Lock()
				defer e.blobs.mu.Unlock()
				for _, key := range e.blobs.got {
					if !strings.HasSuffix(key, ".description") {
						t.Errorf("describe mode read %s: it reads descriptions only", key)
					}
				}
			})
		}
	})
}

func TestDefaultBudgetKeepsRoomForDescriptions(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		var names []string
		for seed := range 3 {
			// About 1.44 MB of base64 each: all three fit DefaultBudget.
			names = append(names, e.put(t, tenantA, base64.StdEncoding.EncodeToString(pngBytes(t, 70+seed, 600, 600, true))))
		}
		// Without room kept for the descriptions all three images would be
		// inline, and the answer over 6 MB.
		content := list{textBlock(strings.Repeat("a", 1_300_000))}
		// As many refs as get descriptions, each of the longest, and
		// made of the bytes the Lambda response escapes most; older than
		// the images, which are spent first.
		worst := strings.Repeat("<", images.MaxDescription)
		var described []string
		for k := range MaxDescribedRefs {
			name := fmt.Sprintf("%016x", k)
			if err := e.images.PutDescription(ctx, tenantA, name, worst); err != nil {
				t.Fatal(err)
			}
			content = append(content, textBlock(refs.Ref(name)))
			described = append(described, name)
		}
		e.hold(t, tenantA, "chat-1", described...)
		for _, n := range names {
			content = append(content, textBlock(refs.Ref(n)))
		}
		body, err := api.Marshal(restoreBody(FormatPi, obj{"messages": list{obj{"role": "user", "content": content}}}))
		if err != nil {
			t.Fatal(err)
		}
		status, out := e.post(t, tenantA, "hooks/before-request", []byte(body))
		if status != http.StatusOK {
			t.Fatalf("status %d: %.300s", status, out)
		}
		envelope, _ := json.Marshal(string(out))
		if len(envelope) > 6_000_000 {
			t.Fatalf("the answer is %d bytes inside a Lambda response, over 6 MB", len(envelope))
		}
		var got describedAnswer
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		// Left as text, newest first: the oldest image (past the budget,
		// undescribed), then the described refs; the oldest of those is
		// past the bound.
		if len(got.Restored) != 2 || got.Described != MaxDescribedRefs-1 || got.PendingDescriptions != 2 {
			t.Fatalf("%d restored, %d described, %d pending; want 2, %d, 2", len(got.Restored), got.Described, got.PendingDescriptions, MaxDescribedRefs-1)
		}
	})
}

// worstDescriptions describes every image with the text that grows most
// inside a Lambda response: MaxDescription quotes.
type worstDescriptions struct{}

func (worstDescriptions) Description(context.Context, string, string) (string, error) {
	return strings.Repeat(`"`, images.MaxDescription), nil
}

func TestDescribedRefsKeepTheDefaultAnswerWithinLambdasLimit(t *testing.T) {
	// A large request (quotes, which double inside the Lambda response),
	// stored images enough to fill any budget, and as many refs left as
	// text as may be described, each with the worst description: the
	// answer, as Lambda sends it, still fits.
	mem := &memImages{m: map[string]images.Image{}}
	var blocks []string
	for i := range MaxDescribedRefs + 300 {
		data := make([]byte, 64<<10)
		copy(data, fmt.Sprintf("image %d", i))
		name := fmt.Sprintf("%016x", i+1)
		mem.m[tenantA+"/"+name] = images.Image{Name: name, MimeType: "image/png", Data: data}
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":%q}`, refs.Ref(name)))
	}
	padding := fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat(`"`, 1<<20))
	req := fmt.Sprintf(`{"messages":[{"role":"user","content":[%s,%s]}]}`, padding, strings.Join(blocks, ","))
	rs := NewRestore(mem, nil)
	rs.Descriptions = worstDescriptions{}
	mux := http.NewServeMux()
	rs.Register(mux)
	w := serve(t, mux, "hooks/before-request", []byte(`{"format":"anthropic","request":`+req+`}`))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	var a describedAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	inLambda, err := json.Marshal(w.Body.String()) // the body, as a JSON string in the response
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d restored, %d described; answer %d bytes, %d inside the Lambda response", len(a.Restored), a.Described, w.Body.Len(), len(inLambda))
	if a.Described != MaxDescribedRefs || len(a.Restored) == 0 || a.InlineBytes == 0 {
		t.Fatalf("%d restored, %d described: the case does not reach the bound", len(a.Restored), a.Described)
	}
	if len(inLambda) > ResponseLimit {
		t.Errorf("the answer takes %d bytes of the Lambda response, over %d", len(inLambda), ResponseLimit)
	}
}

// longLinker makes links as long as S3 presigned URLs signed with a
// Lambda role's session token.
type longLinker struct{}

func (longLinker) URL(_ context.Context, key string, _ store.LinkChat, _ time.Duration) (string, error) {
	return "https://bucket.example/" + key + "?X-Amz-Security-Token=" + strings.Repeat("t", 1800), nil
}

func TestEveryAnswerFitsLambdasResponse(t *testing.T) {
	// Each case is a request as large as the answer limit allows, with
	// refs that would add more than fits: links past the budget, the
	// list of refs left as text, descriptions in describe mode. What does
	// not fit stays a ref.
	ref := func(i int) string {
		return fmt.Sprintf(`{"type":"text","text":%q}`, refs.Ref(fmt.Sprintf("%016x", i+1)))
	}
	cases := []struct {
		name, format, mode string
		refs, stored       int // refs in the request; the first stored are stored images
		padding            int // bytes of quotes in the request
		check              func(t *testing.T, a describedAnswer)
	}{
		{"links past the budget", FormatOpenAI, "", MaxImagesOpenAI, MaxImagesOpenAI, 300_000, func(t *testing.T, a describedAnswer) {
			if len(a.Restored) == MaxImagesOpenAI {
				t.Error("every image linked: the case does not reach the limit")
			}
		}},
		{"many distinct refs left as text", FormatPi, "", 60_000, 0, 0, func(t *testing.T, a describedAnswer) {
			if len(a.Unrestored) != MaxUnrestored || a.UnrestoredOmitted != 60_000-MaxUnrestored {
				t.Errorf("%d unrestored listed, %d omitted; want %d and %d", len(a.Unrestored), a.UnrestoredOmitted, MaxUnrestored, 60_000-MaxUnrestored)
			}
		}},
		{"describe mode", FormatAnthropic, ModeDescribe, MaxDescribedRefs, MaxDescribedRefs, 1_420_000, func(t *testing.T, a describedAnswer) {
			if a.Described == 0 || a.Described == MaxDescribedRefs {
				t.Errorf("%d described: want some, not all", a.Described)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := &memImages{m: map[string]images.Image{}}
			blocks := []string{fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat(`"`, c.padding))}
			for i := range c.refs {
				if i < c.stored {
					name := fmt.Sprintf("%016x", i+1)
					mem.m[tenantA+"/"+name] = images.Image{Name: name, MimeType: "image/png", Data: make([]byte, 64<<10)}
				}
				blocks = append(blocks, ref(i))
			}
			req := fmt.Sprintf(`{"messages":[{"role":"user","content":[%s]}]}`, strings.Join(blocks, ","))
			rs := NewRestore(mem, longLinker{})
			rs.Descriptions = worstDescriptions{}
			rs.Bounded = true
			mux := http.NewServeMux()
			rs.Register(mux)
			mode := ""
			if c.mode != "" {
				mode = fmt.Sprintf(`"mode":%q,`, c.mode)
			}
			w := serve(t, mux, "hooks/before-request", []byte(`{"format":"`+c.format+`",`+mode+`"request":`+req+`}`))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %.300s", w.Code, w.Body.String())
			}
			var a describedAnswer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatal(err)
			}
			inLambda, err := json.Marshal(w.Body.String())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("request %d bytes; %d restored, %d described; %d bytes inside the Lambda response", len(req), len(a.Restored), a.Described, len(inLambda))
			if len(inLambda) > ResponseLimit {
				t.Errorf("the answer takes %d bytes of the Lambda response, over %d", len(inLambda), ResponseLimit)
			}
			c.check(t, a)
		})
	}
}
