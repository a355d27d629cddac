package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/refs"
)

// recencyEnv serves before-request over images stored in memory; put
// stores a PNG of the given width, distinct for each seed, and returns its
// name and the base64 restore inlines.
func recencyEnv(t *testing.T) (h http.Handler, put func(seed, width int) (name, b64 string)) {
	mem := &memImages{m: map[string]images.Image{}}
	mux := http.NewServeMux()
	NewRestore(mem, nil).Register(mux)
	return mux, func(seed, width int) (string, string) {
		// pngB64 draws 256 distinct images of a size.
		b64 := pngB64(t, seed%256, width+seed/256, 8)
		p, err := images.Shrink(context.Background(), b64)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.PutPrepared(context.Background(), tenantA, p); err != nil {
			t.Fatal(err)
		}
		return p.Name, b64
	}
}

// conversation is a chat in a format's request shape: turns in order,
// each a user message (its text and the refs it attaches), an assistant
// message calling a tool, or that tool's result holding refs.
type turn struct {
	role string // "user", "assistant" or "tool"
	refs []string
}

func conversation(format string, turns []turn) obj {
	text := func(s string) any {
		if format == FormatBedrock {
			return obj{"text": s}
		}
		return textBlock(s)
	}
	blocks := func(first string, names []string) list {
		l := list{text(first)}
		for _, n := range names {
			l = append(l, text(refs.Ref(n)))
		}
		return l
	}
	var msgs list
	for i, tr := range turns {
		id := fmt.Sprintf("call%d", i)
		switch {
		case tr.role == "user":
			msgs = append(msgs, obj{"role": "user", "content": blocks("look", tr.refs)})
		case tr.role == "assistant" && format == FormatAnthropic:
			msgs = append(msgs, obj{"role": "assistant", "content": list{obj{"type": "tool_use", "id": fmt.Sprintf("call%d", i+1), "name": "shot", "input": obj{}}}})
		case tr.role == "assistant" && format == FormatBedrock:
			msgs = append(msgs, obj{"role": "assistant", "content": list{obj{"toolUse": obj{"toolUseId": fmt.Sprintf("call%d", i+1), "name": "shot", "input": obj{}}}}})
		case tr.role == "assistant" && format == FormatOpenAI:
			msgs = append(msgs, obj{"role": "assistant", "content": nil, "tool_calls": list{obj{"id": fmt.Sprintf("call%d", i+1), "type": "function", "function": obj{"name": "shot", "arguments": "{}"}}}})
		case tr.role == "assistant":
			msgs = append(msgs, obj{"role": "assistant", "content": list{obj{"type": "toolCall", "id": fmt.Sprintf("call%d", i+1), "name": "shot", "arguments": obj{}}}})
		case format == FormatPi:
			msgs = append(msgs, obj{"role": "toolResult", "toolCallId": id, "toolName": "shot", "isError": false, "content": blocks("shot", tr.refs)})
		case format == FormatAnthropic:
			msgs = append(msgs, obj{"role": "user", "content": list{obj{"type": "tool_result", "tool_use_id": id, "content": blocks("shot", tr.refs)}}})
		case format == FormatBedrock:
			msgs = append(msgs, obj{"role": "user", "content": list{obj{"toolResult": obj{"toolUseId": id, "content": blocks("shot", tr.refs)}}}})
		default:
			// OpenAI's tool messages take no images: its hosts send a
			// tool's screenshot in a user message after the tool message.
			msgs = append(msgs, obj{"role": "tool", "tool_call_id": id, "content": "shot"},
				obj{"role": "user", "content": blocks("the screenshot", tr.refs)})
		}
	}
	return obj{"messages": msgs}
}

// When not every image fits, the newest win: the images of the newest turn
// (the tool result that just ran), then the user's newest attachment, then
// the rest from the end back; the lists stay in request order.
func TestTheNewestImagesWinTheBudget(t *testing.T) {
	h, put := recencyEnv(t)
	names, sizes := map[string]string{}, map[string]int{}
	// The attachment is the largest, so a budget can close at it.
	for i, k := range []string{"old attachment", "T1", "T2", "attachment", "T3"} {
		width := 8
		if k == "attachment" {
			width = 64
		}
		n, b64 := put(80+i, width)
		names[k], sizes[k] = n, len(b64)
	}
	chat := []turn{
		{"user", []string{names["old attachment"]}},
		{"assistant", nil}, {"tool", []string{names["T1"]}},
		{"assistant", nil}, {"tool", []string{names["T2"]}},
		{"assistant", nil}, {"user", []string{names["attachment"]}},
		{"assistant", nil}, {"tool", []string{names["T3"]}},
	}
	requestOrder := []string{"old attachment", "T1", "T2", "attachment", "T3"}
	tests := []struct {
		rule string
		fits []string // what the budget is made to hold, exactly
		want []string // what is restored
	}{
		{"the tool result that just ran is restored when it fits alone", []string{"T3"}, []string{"T3"}},
		{"then the user's newest attachment", []string{"T3", "attachment"}, []string{"attachment", "T3"}},
		{"then the rest from the end back", []string{"T3", "attachment", "T2"}, []string{"T2", "attachment", "T3"}},
		{"the budget closes at the first image that does not fit", []string{"T3", "T2"}, []string{"T3"}},
		{"everything that fits is restored", requestOrder, requestOrder},
	}
	for _, format := range []string{FormatPi, FormatAnthropic, FormatBedrock, FormatOpenAI} {
		for _, tt := range tests {
			t.Run(format+"/"+tt.rule, func(t *testing.T) {
				budget := 0
				for _, k := range tt.fits {
					budget += sizes[k]
				}
				body, _ := json.Marshal(obj{"format": format, "budgetBytes": budget, "request": conversation(format, chat)})
				w := serve(t, h, "hooks/before-request", body)
				if w.Code != http.StatusOK {
					t.Fatalf("status %d: %s", w.Code, w.Body)
				}
				var a restoreAnswerT
				if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
					t.Fatal(err)
				}
				want := tt.want
				var wantRestored []string
				var wantLeft []Unrestored
				for _, k := range requestOrder {
					if slices.Contains(want, k) {
						wantRestored = append(wantRestored, names[k])
					} else {
						wantLeft = append(wantLeft, Unrestored{Name: names[k], Reason: ReasonBudget})
					}
				}
				if !slices.Equal(a.Restored, wantRestored) || !slices.Equal(a.Unrestored, wantLeft) && len(wantLeft)+len(a.Unrestored) > 0 {
					t.Fatalf("restored %v unrestored %v, want %v and %v", a.Restored, a.Unrestored, wantRestored, wantLeft)
				}
				if got := strings.Count(string(a.Request), "[image "); got != len(wantLeft) {
					t.Errorf("%d refs left as text, want %d", got, len(wantLeft))
				}
			})
		}
	}
}

// The provider's image limit keeps the newest images too.
func TestTheImageLimitKeepsTheNewest(t *testing.T) {
	h, put := recencyEnv(t)
	for _, tt := range []struct {
		format string
		limit  int
	}{
		{FormatPi, MaxImagesPi},
		{FormatAnthropic, MaxImagesAnthropic},
		{FormatBedrock, MaxImagesBedrock},
		{FormatOpenAI, MaxImagesOpenAI},
	} {
		t.Run(tt.format, func(t *testing.T) {
			// One more screenshot than the provider takes, a turn each.
			var chat []turn
			var names []string
			for i := range tt.limit + 1 {
				n, _ := put(i, 8)
				names = append(names, n)
				chat = append(chat, turn{"assistant", nil}, turn{"tool", []string{n}})
			}
			body, _ := json.Marshal(obj{"format": tt.format, "request": conversation(tt.format, chat)})
			w := serve(t, h, "hooks/before-request", body)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %.300s", w.Code, w.Body)
			}
			var a restoreAnswerT
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatal(err)
			}
			want := []Unrestored{{Name: names[0], Reason: ReasonLimit}}
			if !slices.Equal(a.Restored, names[1:]) || !slices.Equal(a.Unrestored, want) {
				t.Fatalf("restored %d (first %v) unrestored %v; want all but the oldest, %v", len(a.Restored), a.Restored[:1], a.Unrestored, want)
			}
		})
	}
}
