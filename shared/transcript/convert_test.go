package transcript

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// TestMessagesBecomeEntries checks each message shape against the entries
// memory's log rules make of it.
func TestMessagesBecomeEntries(t *testing.T) {
	img := pngB64(t, 1, 8, 8)
	name := images.Name(img)
	ref := refs.Ref(name)
	// A ref block must name a stored image: the one stored below.
	other := refs.Ref(images.Name(pngB64(t, 9, 8, 8)))
	cases := []struct {
		name string
		msg  string
		want []string // kind|text
	}{
		{"UserStringContent", `{"role":"user","content":"hello"}`, []string{"user|hello"}},
		{"UserTextBlocksJoinedByNewline", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, []string{"user|a\nb"}},
		{"UserImageBecomesRefLine", `{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","mimeType":"image/png","data":"` + img + `"},{"type":"text","text":"ok?"}]}`, []string{"user|look\n" + ref + "\nok?"}},
		{"UserRefBlockStaysRefLine", `{"role":"user","content":[{"type":"text","text":"see"},{"type":"text","text":"` + other + `"}]}`, []string{"user|see\n" + other}},
		{"AssistantTextBlocksAreTalkEach", `{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}],"usage":{"input":3}}`, []string{"talk|one", "talk|two"}},
		{"AssistantToolCallCompactJSON", `{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"toolCall","id":"t1","name":"read","arguments":{ "path" : "/a b",  "n": [1, 2] }}]}`, []string{"talk|calling", `tool|read {"path":"/a b","n":[1,2]}`}},
		{"AssistantToolCallWithoutArguments", `{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"now"}]}`, []string{"tool|now {}"}},
		{"ThinkingIsNeverLogged", `{"role":"assistant","content":[{"type":"thinking","thinking":"secret plan"},{"type":"text","text":"hi"}]}`, []string{"talk|hi"}},
		{"ToolResultIsOneEcho", `{"role":"toolResult","toolCallId":"t1","toolName":"read","content":[{"type":"text","text":"line1"},{"type":"text","text":"line2"}],"isError":false}`, []string{"echo|read: line1\nline2"}},
		{"ToolResultImageBecomesRefLine", `{"role":"toolResult","toolCallId":"t1","toolName":"shot","content":[{"type":"text","text":"done"},{"type":"image","mimeType":"image/png","data":"` + img + `"}]}`, []string{"echo|shot: done\n" + ref}},
		{"WorkKindOverrides", `{"role":"assistant","kind":"work","content":[{"type":"text","text":"report"}]}`, []string{"work|report"}},
		{"NoteKindOverrides", `{"role":"user","kind":"note","content":"imported"}`, []string{"note|imported"}},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		if _, err := f.imgs.Put(context.Background(), tenant, pngB64(t, 9, 8, 8)); err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				ch := fmt.Sprintf("c%d", i)
				ids, err := f.log.Append(ctx, tenant, ch, []pi.Message{msg(t, c.msg)}, "r")
				if err != nil {
					t.Fatal(err)
				}
				es, err := f.log.Entries(ctx, f.cur(tenant, ch), 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				if got := texts(es); !slices.Equal(got, c.want) {
					t.Fatalf("entries:\n got %q\nwant %q", got, c.want)
				}
				if len(ids) != len(es) {
					t.Fatalf("ids %v for %d entries", ids, len(es))
				}
				for _, e := range es {
					if e.Receipt != "r" || e.Of != -1 || e.Tool != "" {
						t.Errorf("entry %d: receipt %q, of %d, tool %q", e.I, e.Receipt, e.Of, e.Tool)
					}
				}
			})
		}
	})
}

// TestEntryDateIsTheMessageTimestamp: pi's timestamp dates an entry; a
// message without one gets the time of the append.
func TestEntryDateIsTheMessageTimestamp(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		msgs := []pi.Message{
			msg(t, `{"role":"user","content":"a","timestamp":1700000000123}`),
			msg(t, `{"role":"user","content":"b"}`),
		}
		if _, err := f.log.Append(ctx, tenant, chat, msgs, "r"); err != nil {
			t.Fatal(err)
		}
		es := f.all(t)
		if want := time.UnixMilli(1700000000123).UTC(); !es[0].Date.Equal(want) {
			t.Errorf("entry 0 date %v, want %v", es[0].Date, want)
		}
		if !es[1].Date.Equal(f.clock) {
			t.Errorf("entry 1 date %v, want the append's %v", es[1].Date, f.clock)
		}
	})
}

// TestMemoryToolResultsAreMarked: results of zoom, search and date carry
// their tool, and a zoom result the id it opened.
func TestMemoryToolResultsAreMarked(t *testing.T) {
	cases := []struct {
		name     string
		msg      string
		tool     string
		of       int64
		wantText string
	}{
		{"ZoomWithDetails", `{"role":"toolResult","toolCallId":"z","toolName":"zoom","content":[{"type":"text","text":"page"}],"details":{"id":42}}`, "zoom", 42, "zoom: page"},
		{"ZoomWithoutDetails", `{"role":"toolResult","toolCallId":"z","toolName":"zoom","content":[{"type":"text","text":"page"}]}`, "zoom", -1, "zoom: page"},
		{"Search", `{"role":"toolResult","toolCallId":"s","toolName":"search","content":[{"type":"text","text":"hits"}]}`, "search", -1, "search: hits"},
		{"Date", `{"role":"toolResult","toolCallId":"d","toolName":"date","content":[{"type":"text","text":"2025"}]}`, "date", -1, "date: 2025"},
		{"OtherTool", `{"role":"toolResult","toolCallId":"o","toolName":"grep","content":[{"type":"text","text":"x"}],"details":{"id":3}}`, "", -1, "grep: x"},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				ch := fmt.Sprintf("m%d", i)
				if _, err := f.log.Append(ctx, tenant, ch, []pi.Message{msg(t, c.msg)}, "r"); err != nil {
					t.Fatal(err)
				}
				e, err := f.log.Entry(ctx, f.cur(tenant, ch), 0)
				if err != nil {
					t.Fatal(err)
				}
				if e.Tool != c.tool || e.Of != c.of || e.Text != c.wantText || e.Kind != KindEcho {
					t.Fatalf("got kind %q tool %q of %d text %q; want echo %q %d %q", e.Kind, e.Tool, e.Of, e.Text, c.tool, c.of, c.wantText)
				}
			})
		}
	})
}

// TestLongTextSplitIntoPieces: user and talk text over 25,000 characters
// becomes entries of at most 25,000 characters, cut between runes and never
// inside a ref, that join back to the text.
func TestLongTextSplitIntoPieces(t *testing.T) {
	ref := refs.Ref("00112233aabbccdd")
	cases := []struct {
		name string
		text string
		role string
	}{
		{"ASCIIUser", strings.Repeat("abcdefghij", 6000), "user"},
		{"MultiByteRunesTalk", strings.Repeat("é世🙂", 20001), "assistant"},
		{"RefAcrossTheCut", strings.Repeat("x", PieceChars-10) + ref + strings.Repeat("y", 100), "user"},
		{"ExactlyAtTheLimit", strings.Repeat("z", PieceChars), "user"},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				ch := fmt.Sprintf("s%d", i)
				m := pi.Message{Role: c.role, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(c.text)}}}
				if _, err := f.log.Append(ctx, tenant, ch, []pi.Message{m}, "r"); err != nil {
					t.Fatal(err)
				}
				es, err := f.log.Entries(ctx, f.cur(tenant, ch), 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				var joined strings.Builder
				for _, e := range es {
					n := utf8.RuneCountInString(e.Text)
					if n > PieceChars || n == 0 {
						t.Errorf("entry %d has %d characters", e.I, n)
					}
					if !utf8.ValidString(e.Text) {
						t.Errorf("entry %d is cut inside a rune", e.I)
					}
					joined.WriteString(e.Text)
				}
				if joined.String() != c.text {
					t.Fatal("pieces do not join back to the text")
				}
				wantN := (utf8.RuneCountInString(c.text) + PieceChars - 1) / PieceChars
				if c.name == "RefAcrossTheCut" {
					if !strings.HasPrefix(es[1].Text, ref) {
						t.Errorf("the ref was split: second piece starts %q", es[1].Text[:30])
					}
				} else if len(es) != wantN {
					t.Errorf("%d pieces, want %d", len(es), wantN)
				}
			})
		}
	})
}

// TestLongEchoCappedWithRefsOfMiddle: an echo over 30,000 characters keeps
// its head and tail with a notice of what was cut, and the refs named only
// in the cut middle follow as ref lines.
func TestLongEchoCappedWithRefsOfMiddle(t *testing.T) {
	inHead := refs.Ref("aaaaaaaaaaaaaaaa")
	inMiddle := refs.Ref("bbbbbbbbbbbbbbbb")
	alsoTail := refs.Ref("cccccccccccccccc")
	body := inHead + strings.Repeat("h", 20000) + inMiddle + alsoTail + strings.Repeat("m", 40000) + strings.Repeat("t", 10000) + alsoTail + strings.Repeat("t", 100)
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		m := msg(t, `{"role":"toolResult","toolCallId":"x","toolName":"cat","content":[{"type":"text","text":`+jsonString(body)+`}]}`)
		if _, err := f.log.Append(ctx, tenant, chat, []pi.Message{m}, "r"); err != nil {
			t.Fatal(err)
		}
		e, err := f.log.Entry(ctx, f.cur(tenant, chat), 0)
		if err != nil {
			t.Fatal(err)
		}
		full := "cat: " + body
		capped, tail, ok := strings.Cut(e.Text, "\n"+inMiddle)
		if !ok || tail != "" {
			t.Fatalf("the middle's ref is not the last line: ...%q", e.Text[len(e.Text)-80:])
		}
		if n := utf8.RuneCountInString(capped); n > EchoChars {
			t.Errorf("capped text has %d characters, over %d", n, EchoChars)
		}
		if !strings.HasPrefix(capped, "cat: "+inHead+"hhh") || !strings.HasSuffix(capped, "ttt") {
			t.Error("head or tail not kept")
		}
		head, rest, _ := strings.Cut(capped, "\n[... ")
		numText, after, _ := strings.Cut(rest, " characters omitted ...]\n")
		var omitted int
		fmt.Sscan(numText, &omitted)
		if got := utf8.RuneCountInString(head) + omitted + utf8.RuneCountInString(after); got != utf8.RuneCountInString(full) {
			t.Errorf("head %d + omitted %d + tail %d != %d", utf8.RuneCountInString(head), omitted, utf8.RuneCountInString(after), utf8.RuneCountInString(full))
		}
		if strings.Count(e.Text, alsoTail) != 1 {
			t.Errorf("a ref kept in the tail is listed again")
		}
	})
}

// TestZoomResultLoggedIdenticalWithAndWithoutOffload: a zoom result's page
// names its images; the same result with image blocks (carrying their
// stored name or not), with ref blocks from offload, or with neither logs
// the same text.
func TestZoomResultLoggedIdenticalWithAndWithoutOffload(t *testing.T) {
	img := pngB64(t, 2, 6, 6)
	name := images.Name(img)
	wide := pngB64(t, 3, 2100, 4) // stored shrunk: its name is not its copy's
	stored := images.Name(wide)
	page := "[42] user: look at this\n" + refs.Ref(name) + "\nand " + refs.Ref(stored)
	pageBlock := `{"type":"text","text":` + jsonString(page) + `}`
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		// The page's second image was stored earlier; the zoom result
		// carries its stored copy under its name, as zoom gives it.
		if _, err := f.imgs.Put(ctx, tenant, wide); err != nil {
			t.Fatal(err)
		}
		copied, err := f.imgs.Get(ctx, tenant, stored)
		if err != nil {
			t.Fatal(err)
		}
		variants := map[string]string{
			"NoImages":           `[` + pageBlock + `]`,
			"InlineImages":       `[` + pageBlock + `,{"type":"image","mimeType":"image/png","data":"` + img + `"},{"type":"image","mimeType":"image/jpeg","name":"` + stored + `","data":"` + base64.StdEncoding.EncodeToString(copied.Data) + `"}]`,
			"OffloadedRefBlocks": `[` + pageBlock + `,{"type":"text","text":"` + refs.Ref(name) + `"},{"type":"text","text":"` + refs.Ref(stored) + `"}]`,
		}
		got := map[string]string{}
		for v, content := range variants {
			m := msg(t, `{"role":"toolResult","toolCallId":"z","toolName":"zoom","content":`+content+`,"details":{"id":42}}`)
			if _, err := f.log.Append(ctx, tenant, v, []pi.Message{m}, "r"); err != nil {
				t.Fatal(err)
			}
			e, err := f.log.Entry(ctx, f.cur(tenant, v), 0)
			if err != nil {
				t.Fatal(err)
			}
			got[v] = e.Text
			if e.Of != 42 || e.Tool != "zoom" {
				t.Errorf("%s: of %d tool %q", v, e.Of, e.Tool)
			}
		}
		want := "zoom: " + page
		for v, text := range got {
			if text != want {
				t.Errorf("%s logged %q, want %q", v, text, want)
			}
		}
		// An image the page does not name is still logged as its ref.
		extra := pngB64(t, 4, 6, 6)
		m := msg(t, `{"role":"toolResult","toolCallId":"z","toolName":"zoom","content":[`+pageBlock+`,{"type":"image","mimeType":"image/png","data":"`+extra+`"}]}`)
		if _, err := f.log.Append(ctx, tenant, "extra", []pi.Message{m}, "r"); err != nil {
			t.Fatal(err)
		}
		e, _ := f.log.Entry(ctx, f.cur(tenant, "extra"), 0)
		if e.Text != want+"\n"+refs.Ref(images.Name(extra)) {
			t.Errorf("an image the page does not name: %q", e.Text)
		}
	})
}

// TestRowsNeverHoldBase64 sends 50 images in one message: the row holds
// their refs only, stays under the budget, and each image is stored.
func TestRowsNeverHoldBase64(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		var b64s []string
		for i := range 50 {
			b64s = append(b64s, pngB64(t, uint64(100+i), 64, 64))
		}
		m := imageMsg(t, "fifty pictures", b64s...)
		ids, err := f.log.Append(ctx, tenant, chat, []pi.Message{m}, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 {
			t.Fatalf("ids %v, want one entry", ids)
		}
		for _, it := range f.table.writes() {
			if it.Size() > store.ItemBudget {
				t.Errorf("row %s is %d bytes", it.SK, it.Size())
			}
			for _, b := range b64s {
				if strings.Contains(string(it.Body), b[:64]) {
					t.Fatalf("row %s holds base64", it.SK)
				}
			}
		}
		e := f.all(t)[0]
		for _, b := range b64s {
			name := images.Name(b)
			if !strings.Contains(e.Text, refs.Ref(name)) {
				t.Fatalf("entry lacks the ref of %s", name)
			}
			if _, err := f.imgs.Get(ctx, tenant, name); err != nil {
				t.Fatalf("image %s not stored: %v", name, err)
			}
		}
	})
}

func TestEmptyMessageIsRefused(t *testing.T) {
	for _, content := range []string{`[]`, `""`, `[{"type":"text","text":""}]`} {
		err := checkMessages([]pi.Message{msg(t, `{"role":"user","content":`+content+`}`)})
		var in *fault.Error
		if !errors.As(err, &in) || in.Field != "messages[0].content" {
			t.Errorf("content %s: error %v, want an input error naming messages[0].content", content, err)
		}
	}
}
