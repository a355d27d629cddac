package imagefacts

import (
	"encoding/base64"
	"testing"

	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/pi"
)

func TestEighteenConversationsSendEachImageThreeTimesAmongPlainTalk(t *testing.T) {
	facts := Catalog()
	pngs := renderAll(t, facts)
	convs, err := Conversations(facts, pngs)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 18 {
		t.Fatalf("%d conversations, want 18", len(convs))
	}
	perFact := map[int]int{}
	slots := map[int]bool{}
	chats := map[string]bool{}
	longTurns := 0
	for _, c := range convs {
		perFact[c.Fact]++
		slots[c.Slot] = true
		chats[c.Chat] = true
		if len(c.Messages) != ChatEntries {
			t.Errorf("%s: %d messages, want %d", c.Chat, len(c.Messages), ChatEntries)
		}
		for i, m := range c.Messages {
			var images int
			for _, b := range m.Content.Blocks {
				switch b.Type {
				case pi.TypeImage:
					images++
					data, err := base64.StdEncoding.DecodeString(b.Data)
					if err != nil || string(data) != string(pngs[c.Fact]) {
						t.Errorf("%s message %d: not the image of fact %d", c.Chat, i, c.Fact)
					}
				case pi.TypeText:
					// The fact must reach the tree from the image alone.
					for _, f := range facts {
						if Contains(b.Text, f.Fact) {
							t.Errorf("%s message %d states %q in text", c.Chat, i, f.Fact)
						}
					}
					if len(memory.LeafSource("talk", b.Text)) > memory.LineBytes {
						longTurns++
					}
				}
			}
			wantImages := 0
			if i == c.Slot {
				wantImages = 1
			}
			if images != wantImages || (i%2 == 0) != (m.Role == pi.RoleUser) {
				t.Errorf("%s message %d: role %s with %d images", c.Chat, i, m.Role, images)
			}
		}
	}
	for i := range facts {
		if perFact[i] != PerImage {
			t.Errorf("fact %d is sent in %d conversations, want %d", i, perFact[i], PerImage)
		}
	}
	if len(slots) != ChatEntries/2 || len(chats) != len(convs) {
		t.Errorf("images at %d distinct entries in %d distinct chats", len(slots), len(chats))
	}
	if longTurns == 0 {
		t.Error("no turn is longer than a line, so no text-only summary would be written")
	}
}
