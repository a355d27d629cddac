package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store/storefake"
)

var updateRepeated = flag.Bool("update-repeated", false, "rewrite testdata/repeated-refs from the code as it is")

// repeatedRefsBody is a before-request body in format of 20 ref blocks
// naming 5 images in turn, half in the user's own content and half in a
// tool result (a second user message for OpenAI), some ref blocks with
// fields of their own, and a text that only mentions a ref.
func repeatedRefsBody(t *testing.T, format string, names []string) []byte {
	var content list
	for i := range 20 {
		ref := refs.Ref(names[i%len(names)])
		var b obj
		switch format {
		case FormatBedrock:
			b = obj{"text": ref}
		case FormatAnthropic:
			b = textBlock(ref)
			if i%7 == 3 {
				b["cache_control"] = obj{"type": "ephemeral"}
			}
		case FormatPi:
			b = textBlock(ref)
			if i%6 == 1 {
				b["note"] = "kept"
			}
		default:
			b = textBlock(ref)
		}
		content = append(content, b)
		if i == 4 && format != FormatBedrock {
			content = append(content, textBlock("as "+ref+" shows"))
		}
	}
	body, err := json.Marshal(restoreBody(format, floorRequest(format, content[:11], content[11:])))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestRefsNamingAnImageAgainAnswerAsEachAlone: however many ref blocks
// name the same image, each gets the image's whole block, byte for byte
// the answer the restore gave when it encoded the image at every ref
// (testdata/repeated-refs, written by that code), in every format.
func TestRefsNamingAnImageAgainAnswerAsEachAlone(t *testing.T) {
	imgs := images.New(storefake.NewBlobs())
	var names []string
	for i := range 5 {
		name, err := imgs.Put(context.Background(), tenantA, pngB64(t, 40+i, 8+i, 8))
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	mux := http.NewServeMux()
	NewRestore(imgs, nil).Register(mux)
	for _, format := range []string{FormatAnthropic, FormatPi, FormatBedrock, FormatOpenAI} {
		t.Run(format, func(t *testing.T) {
			got := post(t, mux, "/v1/chats/c/hooks/before-request", repeatedRefsBody(t, format, names)).Body.Bytes()
			golden := filepath.Join("testdata", "repeated-refs", format+".json")
			if *updateRepeated {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("answer differs from %s:\n got %.600s\nwant %.600s", golden, got, want)
			}
			if n := bytes.Count(got, []byte(`"restored":[`)); n != 1 || bytes.Contains(got, []byte(`"unrestored":[{`)) {
				t.Errorf("not all restored: %.300s", got)
			}
		})
	}
}

// TestRefInReadsARefHoweverEscaped: a JSON string is read as a ref when its
// text is exactly one, each of its bytes escaped or not; a string whose
// text is longer is not, however it is written.
func TestRefInReadsARefHoweverEscaped(t *testing.T) {
	const name = "0123456789abcdef"
	ref := refs.Ref(name)
	escaped := func(s string) string {
		var b strings.Builder
		for _, c := range []byte(s) {
			fmt.Fprintf(&b, `\u%04X`, c)
		}
		return b.String()
	}
	for _, tt := range []struct {
		raw  string
		want string
	}{
		{`"` + ref + `"`, name},
		{` "` + ref + `" `, name},
		{`"` + escaped(ref) + `"`, name},
		{`"\u005bimage ` + name + `\u005d"`, name},
		{`"` + escaped(ref) + ` "`, ""},
		{`"` + escaped(ref+" ") + `"`, ""},
		{`"` + ref + `\n"`, ""},
		{`"as ` + ref + ` shows"`, ""},
		{`"` + strings.Repeat("x", 1<<20) + `"`, ""},
	} {
		if got := refIn(rawjson.Value(tt.raw)); got != tt.want {
			t.Errorf("%.80s: %q, want %q", tt.raw, got, tt.want)
		}
	}
}
