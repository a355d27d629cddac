package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

const (
	kept    = "aaaaaaaaaaaaaaaa"
	kept2   = "bbbbbbbbbbbbbbbb"
	missing = "cccccccccccccccc"
)

func imageFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.images.imgs[kept] = model.Image{MimeType: "image/png", Data: []byte("png one")}
	f.images.imgs[kept2] = model.Image{MimeType: "image/jpeg", Data: []byte("jpeg two")}
	f.comp.script = func(c CompactRequest) (Compacted, error) {
		return Compacted{Line: "described: " + c.Label, Attempts: 1, Model: "scripted", Attached: len(c.Images)}, nil
	}
	return f
}

func TestShortMessageNamingAKeptImageIsSummarizedWithIt(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		wantNames []string
	}{
		{"image only", refs.Ref(kept), []string{kept}},
		{"short caption", "the error I get: " + refs.Ref(kept), []string{kept}},
		{"two images in first-named order", refs.Ref(kept2) + " then " + refs.Ref(kept) + " and " + refs.Ref(kept2), []string{kept2, kept}},
		{"a missing one is skipped, the kept one sent", refs.Ref(missing) + " " + refs.Ref(kept), []string{kept}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := imageFixture(t)
			f.append(t, "user", tt.text)
			f.deliverAll(t)
			if f.comp.callsOf("0+1") != 1 {
				t.Fatalf("a short message naming a kept image made %d compactor calls, want 1", f.comp.callsOf("0+1"))
			}
			c := f.comp.last()
			var names []string
			for _, img := range c.Images {
				names = append(names, img.Name)
				if img.Name == kept && string(img.Data) != "png one" {
					t.Errorf("image %s carries %q", img.Name, img.Data)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("images sent %v, want %v", names, tt.wantNames)
			}
			if c.Source != "user: "+tt.text {
				t.Errorf("source %q", c.Source)
			}
			row, _ := f.row(t, Node{0, 0})
			if row.Text != "described: 0+1" || row.Attached != len(tt.wantNames) {
				t.Errorf("row %+v", row)
			}
			s, err := f.m.Status(context.Background(), f.tenant, f.chat)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Images.Recent) != 1 || s.Images.Recent[0].Attached != len(tt.wantNames) || s.Images.Leaves != 1 {
				t.Errorf("status images %+v", s.Images)
			}
		})
	}
}

func TestLeafWithoutAKeptImageStaysWordForWord(t *testing.T) {
	tests := []struct {
		name  string
		entry transcript.Entry
	}{
		{"names no image", transcript.Entry{Kind: "user", Text: "no pictures here", Of: -1}},
		{"names only a never-stored image", transcript.Entry{Kind: "user", Text: "see " + refs.Ref(missing), Of: -1}},
		{"a zoom page of an entry whose leaf saw the image", transcript.Entry{Kind: "echo", Tool: "zoom", Of: 0, Text: "zoom: user: look " + refs.Ref(kept)}},
		{"a zoom page whose original is unknown", transcript.Entry{Kind: "echo", Tool: "zoom", Of: -1, Text: "zoom: " + refs.Ref(kept2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := imageFixture(t)
			f.log.add(f.chat, "user", "look "+refs.Ref(kept)) // entry 0, seen by its own leaf
			i := f.log.addEntry(f.chat, tt.entry)
			if err := f.m.Appended(context.Background(), f.ch(), i+1); err != nil {
				t.Fatal(err)
			}
			f.deliverAll(t)
			row, ok := f.row(t, Node{0, i})
			if !ok {
				t.Fatal("leaf not built")
			}
			if want := tt.entry.Kind + ": " + tt.entry.Text; row.Text != want || !row.Verbatim {
				t.Errorf("leaf = %q (verbatim %v), want %q word for word", row.Text, row.Verbatim, want)
			}
			if f.comp.callsOf(Node{0, i}.Label()) != 0 {
				t.Errorf("the compactor was called")
			}
		})
	}
}

func TestZoomPageSendsOnlyImagesItsOriginalDidNotShow(t *testing.T) {
	f := imageFixture(t)
	f.log.add(f.chat, "user", "look "+refs.Ref(kept))
	i := f.log.addEntry(f.chat, transcript.Entry{Kind: "echo", Tool: "zoom", Of: 0, Text: "zoom: " + refs.Ref(kept) + " and new " + refs.Ref(kept2)})
	if err := f.m.Appended(context.Background(), f.ch(), i+1); err != nil {
		t.Fatal(err)
	}
	f.deliverAll(t)
	c := f.comp.last()
	if c.Label != "1+1" || len(c.Images) != 1 || c.Images[0].Name != kept2 {
		t.Errorf("zoom page's leaf sent %+v", c.Images)
	}
}

func TestFailedImageReadLeavesTheLeafUnbuiltAndRetriesInTenSeconds(t *testing.T) {
	f := imageFixture(t)
	f.images.setFail(store.Unavailable("get", errors.New("s3 is down")))
	f.append(t, "user", "screenshot "+refs.Ref(kept))
	f.append(t, "talk", "I see")
	later := f.deliverAll(t)
	if _, ok := f.row(t, Node{0, 0}); ok {
		t.Fatal("the leaf was built without its image")
	}
	if _, ok := f.row(t, Node{1, 0}); ok {
		t.Fatal("the merge above the leaf was built")
	}
	if len(later) != 1 || later[0].delay != DefaultRetry {
		t.Fatalf("came back %+v, want once after %s", later, DefaultRetry)
	}
	st := f.state(t)
	if st.waiting() != 1 || !strings.Contains(st.LastError, "s3 is down") || st.Retries[0].Refusals != 0 {
		t.Fatalf("state after the failed read: %+v", st.Retries)
	}
	// The outage ends; ten seconds on, the retry builds it with the image.
	f.images.setFail(nil)
	f.clock.Add(DefaultRetry)
	if err := build(t, f, Node{0, 0}); err != nil {
		t.Fatal(err)
	}
	f.deliverAll(t)
	c := f.comp.seen[0]
	if c.Label != "0+1" || len(c.Images) != 1 || c.Images[0].Name != kept {
		t.Fatalf("retried leaf sent %+v", c)
	}
	if _, ok := f.row(t, Node{1, 0}); !ok {
		t.Error("the merge never followed")
	}
}

func TestFailedImageReadIsRetriedForeverNotMadeMechanical(t *testing.T) {
	f := imageFixture(t)
	f.images.setFail(store.Unavailable("get", errors.New("throttled")))
	f.append(t, "user", refs.Ref(kept))
	f.queue.take()
	for k := 0; k < 2*RefusalLimit; k++ {
		if err := build(t, f, Node{0, 0}); err == nil {
			t.Fatal("built during the outage")
		}
		f.clock.Add(DefaultRetry)
	}
	if f.state(t).MechanicalCount != 0 || f.comp.total() != 0 {
		t.Error("an outage led to a mechanical line or a model call")
	}
}

func TestMergesSendNoImages(t *testing.T) {
	f := imageFixture(t)
	f.comp.lineLen = 300
	f.comp.script = nil
	f.append(t, "user", strings.Repeat("x", 600)+refs.Ref(kept))
	f.append(t, "user", strings.Repeat("y", 600))
	f.deliverAll(t)
	for _, c := range f.comp.seen {
		if c.Level > 0 && (c.Images == nil || len(c.Images) != 0) {
			t.Errorf("merge %s sent images %v", c.Label, c.Images)
		}
		if c.Images == nil {
			t.Errorf("%s: Images is nil; it must always be present", c.Label)
		}
	}
}

func TestALeafLoadsNoMoreImagesThanAProviderTakesNorPastItsByteBudget(t *testing.T) {
	tests := []struct {
		name       string
		named      int // distinct stored images the message names
		size       int // bytes each
		wantLoaded int
	}{
		{"within both", 3, 10, 3},
		{"past the count", MaxLeafImages + 5, 10, MaxLeafImages},
		{"past the bytes", 5, LeafImageBytes / 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := imageFixture(t)
			var text strings.Builder
			for i := range tt.named {
				name := fmt.Sprintf("%016x", i+1)
				f.images.imgs[name] = model.Image{MimeType: "image/png", Data: make([]byte, tt.size)}
				text.WriteString(refs.Ref(name) + " ")
			}
			f.append(t, "user", text.String())
			f.deliverAll(t)
			c := f.comp.last()
			if len(c.Images) != tt.wantLoaded || f.images.gets != tt.wantLoaded {
				t.Fatalf("the leaf sent %d images after %d reads, want %d of %d: a message naming many stored images must not load them all", len(c.Images), f.images.gets, tt.wantLoaded, tt.named)
			}
			row, _ := f.row(t, Node{0, 0})
			if row.Skipped != tt.named-tt.wantLoaded || len(row.Images) != tt.wantLoaded {
				t.Errorf("row skipped %d, saw %d images; want %d skipped, %d seen", row.Skipped, len(row.Images), tt.named-tt.wantLoaded, tt.wantLoaded)
			}
		})
	}
}
