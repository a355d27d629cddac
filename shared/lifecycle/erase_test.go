package lifecycle_test

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/store"
)

// erase posts an erase request and returns its status and receipt.
func (e *env) erase(tenant, chat string, req any) (int, lifecycle.Erasure, []byte) {
	e.t.Helper()
	code, body := e.do(tenant, "POST", "/v1/chats/"+chat+"/erase", req)
	var out lifecycle.Erasure
	if code == http.StatusOK || code == http.StatusAccepted {
		if err := json.Unmarshal(body, &out); err != nil {
			e.t.Fatalf("erase answer %s: %v", body, err)
		}
	}
	return code, out, body
}

// erasure reads an erasure's receipt.
func (e *env) erasure(tenant, chat, id string) lifecycle.Erasure {
	e.t.Helper()
	var out lifecycle.Erasure
	if err := json.Unmarshal([]byte(e.get(tenant, chat, "erasures/"+id)), &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// holding lists every key of the stores whose stored bytes hold any of
// finds, read beneath the routes: each table item's body (a view
// snapshot decompressed) and each blob, of the whole key space.
func holding(t *testing.T, kb keyedBackend, finds ...[]byte) []string {
	t.Helper()
	var out []string
	for _, k := range kb.keys(t) {
		var data []byte
		switch {
		case strings.HasPrefix(k, "table/"):
			pk, sk, _ := strings.Cut(strings.TrimPrefix(k, "table/"), "\x00")
			it, err := kb.Table.Get(t.Context(), store.Key{PK: pk, SK: sk})
			if err != nil {
				t.Fatalf("%q: %v", k, err)
			}
			data = it.Body
			if sk == store.ViewSK {
				if data, err = io.ReadAll(flate.NewReader(bytes.NewReader(it.Body))); err != nil {
					t.Fatalf("%q: %v", k, err)
				}
			}
		case strings.HasPrefix(k, "blobs/"):
			b, err := kb.Blobs.Get(t.Context(), strings.TrimPrefix(k, "blobs/"))
			if err != nil {
				t.Fatalf("%q: %v", k, err)
			}
			data = b.Data
		default:
			continue
		}
		for _, f := range finds {
			if bytes.Contains(data, f) {
				out = append(out, fmt.Sprintf("%q", k))
				break
			}
		}
	}
	return out
}

// An erased message is a tombstone in its place and nothing of it is
// left: not its words (in the log, the receipt of its append, any summary
// line, the view snapshot, another process's caches, search, export,
// read-back) nor its image's bytes; every other message keeps its seq,
// the summary lines above it are rebuilt, and the receipt says so.
func TestAnErasedMessageLeavesNoWordOrImageBytesBehind(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			e := newEnvBuilding(t, kb.Backend, 0, nil, quoting{}, settleSoon)
			other := newEnvBuilding(t, kb.Backend, 0, nil, quoting{}) // a second process, its caches warm
			const secret = "PASSPORT-X12345678"
			photo := pngFor(t, color.RGBA{200, 10, 10, 255})
			raw, _ := base64.StdEncoding.DecodeString(photo)
			name := images.Name(photo)
			var msgs []map[string]any
			for i := range 8 {
				switch i {
				case 3:
					msgs = append(msgs, map[string]any{"role": "user", "timestamp": 1_700_000_000_000, "content": []map[string]any{
						{"type": "text", "text": "my number is " + secret + " " + strings.Repeat("and more words that need a summary ", 20)},
						{"type": "image", "data": photo, "mimeType": "image/png"}}})
				default:
					msgs = append(msgs, longUser(fmt.Sprint("message ", i), 1_700_000_000_000+int64(i)))
				}
			}
			ids := e.append("alice", "c", msgs...)
			e.build()
			for _, p := range []*env{e, other} {
				if got := p.everything("alice", "c", "my number"); !strings.Contains(got["view"], secret) && !strings.Contains(got["tree top"], secret) {
					t.Fatalf("before the erasure the secret is not in the summaries: %v", got)
				}
			}
			if held := holding(t, kb, []byte(secret)); len(held) == 0 {
				t.Fatal("before the erasure no stored key holds the secret: the scan cannot fail")
			}

			code, rec, body := e.erase("alice", "c", map[string]any{"seqs": []int64{ids[3]}})
			if code != http.StatusOK && code != http.StatusAccepted {
				t.Fatalf("erase: %d %s", code, body)
			}
			if again := e.erasure("alice", "c", rec.Erasure); again.Erasure != rec.Erasure {
				t.Fatalf("receipt of %s is %+v", rec.Erasure, again)
			}
			if _, twin, _ := e.erase("alice", "c", map[string]any{"seqs": []int64{ids[3]}}); twin.Erasure != rec.Erasure {
				t.Fatalf("the same request again is erasure %s, not %s", twin.Erasure, rec.Erasure)
			}
			// Hidden at once, before any rebuild, in both processes.
			for _, p := range []*env{e, other} {
				for route, got := range p.everything("alice", "c", "my number") {
					if strings.Contains(got, secret) {
						t.Errorf("before the rebuild, %s of a process shows the erased words: %s", route, got)
					}
				}
			}
			e.build()
			e.drainUntil(func() bool { return e.erasure("alice", "c", rec.Erasure).Done }) // the image settled
			rec = e.erasure("alice", "c", rec.Erasure)
			if !rec.Done || rec.Finished == nil || len(rec.Messages) != 1 || rec.Messages[0].Seq != ids[3] ||
				strings.Join(rec.Nodes, " ") != "3+1 2+2 0+4 0+8" || rec.Rebuilt != 4 ||
				strings.Join(rec.ImagesDeleted, " ") != name || rec.ImagesKept != 0 {
				t.Fatalf("receipt after the rebuild: %+v", rec)
			}
			for _, p := range []*env{e, other} {
				all := p.everything("alice", "c", "my number")
				for route, got := range all {
					if strings.Contains(got, secret) {
						t.Errorf("%s shows the erased words: %s", route, got)
					}
				}
				if strings.Contains(all["view"], "not summarized yet") {
					t.Errorf("the view is not rebuilt: %s", all["view"])
				}
				if strings.Contains(all["search"], "my number is") {
					t.Errorf("search finds the erased message: %s", all["search"])
				}
			}
			page := e.messages("alice", "c", "")
			if len(page.Messages) != 8 || page.Messages[3].Seq != ids[3] || page.Messages[3].Erased == nil || page.Messages[3].Message != nil ||
				page.Messages[4].Seq != ids[4] || page.Messages[4].Message == nil {
				t.Fatalf("read-back after the erasure: %+v", page.Messages)
			}
			if zoom := e.tool("alice", "c", "zoom", map[string]any{"id": ids[3]}); !strings.Contains(zoom, "erased 20") {
				t.Errorf("zoom of the erased entry does not say it was erased and when: %s", zoom)
			}
			if exp := e.export("alice", "c"); bytes.Contains(exp, []byte(secret)) || bytes.Contains(exp, []byte(photo)) {
				t.Errorf("the export holds the erased message")
			}
			if held := holding(t, kb, []byte(secret), raw, []byte(photo)); len(held) > 0 {
				t.Errorf("after the erasure these keys hold its words or image bytes: %v", held)
			}
		})
	}
}

// A bad erase request is a 400 naming the field, and erases nothing.
func TestABadEraseRequestIsA400NamingTheFieldAndErasesNothing(t *testing.T) {
	t.Parallel()
	b := backends(t)[0]
	e := newEnv(t, b, 0)
	e.append("alice", "c", user("one message"), user("another message"))
	for _, tc := range []struct {
		name  string
		body  any
		field string
	}{
		{"nothing named", map[string]any{}, "seqs"},
		{"empty seqs", map[string]any{"seqs": []int64{}}, "seqs"},
		{"an unknown seq", map[string]any{"seqs": []int64{0, 9}}, "seqs"},
		{"a negative seq", map[string]any{"seqs": []int64{-1}}, "seqs"},
		{"too short a match", map[string]any{"match": "one"}, "match"},
		{"two kinds", map[string]any{"seqs": []int64{0}, "match": "message"}, "seqs"},
		{"a bad image name", map[string]any{"images": []string{"../x"}}, "images"},
		{"an image no message shows", map[string]any{"images": []string{strings.Repeat("ab", 8)}}, "images"},
	} {
		code, _, body := e.erase("alice", "c", tc.body)
		var answer struct {
			Error struct{ Field string } `json:"error"`
		}
		_ = json.Unmarshal(body, &answer)
		if code != http.StatusBadRequest || answer.Error.Field != tc.field {
			t.Errorf("%s: %d %s, want a 400 naming %q", tc.name, code, body, tc.field)
		}
	}
	page := e.messages("alice", "c", "")
	for _, m := range page.Messages {
		if m.Erased != nil {
			t.Fatalf("a refused request erased %d", m.Seq)
		}
	}
}

// An erasure by match erases every message whose text holds it, and
// keeps an image another chat still names (counted, not named).
func TestAnErasureByMatchKeepsAnImageAnotherChatNames(t *testing.T) {
	t.Parallel()
	b := backends(t)[0]
	e := newEnvBuilding(t, b, 0, nil, nil, settleSoon)
	shared := pngFor(t, color.RGBA{1, 2, 3, 255})
	e.append("alice", "keeper", withImage("kept here", shared))
	e.append("alice", "c", user("nothing here"), withImage("secret words", shared), user("more secret words"))
	code, rec, body := e.erase("alice", "c", map[string]any{"match": "secret words"})
	if code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("erase: %d %s", code, body)
	}
	e.drainUntil(func() bool { return e.erasure("alice", "c", rec.Erasure).Done }) // the image settled
	rec = e.erasure("alice", "c", rec.Erasure)
	if len(rec.Messages) != 2 || rec.Messages[0].Seq != 1 || rec.Messages[1].Seq != 2 || rec.ImagesKept != 1 || len(rec.ImagesDeleted) != 0 {
		t.Fatalf("receipt: %+v", rec)
	}
	if !e.imageStored("alice", shared) {
		t.Fatal("the image another chat names was deleted")
	}
}

// An erasure by match or by images of a chat larger than ScanInCall
// answers 202 before it looks for its messages: the request reads no more
// of the log than its length, and the erase task scans the chat and
// erases what it finds; a request the scan finds bad erases nothing and
// says why.
func TestALargeChatsErasureByMatchScansInTheQueue(t *testing.T) {
	t.Parallel()
	b := backends(t)[0]
	e := newEnvBuilding(t, b, 0, nil, nil, func(c *lifecycle.Config) { c.ScanInCall = 4 })
	photo := pngFor(t, color.RGBA{4, 44, 144, 255})
	var msgs []map[string]any
	for i := range 8 {
		msgs = append(msgs, user(fmt.Sprint("message ", i)))
	}
	msgs[5] = withImage("the secret words", photo)
	e.append("alice", "c", msgs...)
	for _, tc := range []struct {
		name    string
		req     map[string]any
		erased  []int64
		refused string
	}{
		{"a match", map[string]any{"match": "secret words"}, []int64{5}, ""},
		{"a match naming nothing", map[string]any{"match": "no such words"}, nil, ""},
		{"an image no message shows", map[string]any{"images": []string{strings.Repeat("cd", 8)}}, nil, "no message of chat c shows image"},
	} {
		code, rec, body := e.erase("alice", "c", tc.req)
		if code != http.StatusAccepted || rec.Done || len(rec.Messages) != 0 {
			t.Fatalf("%s: %d %s, want a 202 with no message found yet", tc.name, code, body)
		}
		if page := e.messages("alice", "c", ""); len(tc.erased) > 0 && page.Messages[5].Erased != nil {
			t.Fatalf("%s: the request erased a message before its scan", tc.name)
		}
		e.drain()
		rec = e.erasure("alice", "c", rec.Erasure)
		var got []int64
		for _, m := range rec.Messages {
			got = append(got, m.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.erased) || !strings.Contains(rec.Refused, tc.refused) || (tc.refused == "") != (rec.Refused == "") {
			t.Errorf("%s: receipt after the task %+v, want %v erased, refused %q", tc.name, rec, tc.erased, tc.refused)
		}
	}
	if page := e.messages("alice", "c", ""); page.Messages[5].Erased == nil || page.Messages[4].Erased != nil {
		t.Errorf("after the tasks: %+v", page.Messages)
	}
}

// An erasure by match erases a message whose image's description holds
// the match; when the image is kept (another chat names it) its
// description goes, so no description holds the erased words.
func TestAnErasureByMatchTakesTheMatchOutOfAKeptImagesDescription(t *testing.T) {
	t.Parallel()
	b := backends(t)[0]
	e := newEnvBuilding(t, b, 0, nil, nil, settleSoon)
	const secret = "PASSPORT-D55443322"
	shot := pngFor(t, color.RGBA{5, 55, 155, 255})
	name := images.Name(shot)
	e.append("alice", "keeper", withImage("kept here", shot))
	e.append("alice", "c", user("nothing here"), withImage("look at this", shot))
	imgs := images.New(b.Blobs)
	if err := imgs.PutDescription(t.Context(), "alice", name, "a passport numbered "+secret); err != nil {
		t.Fatal(err)
	}
	code, rec, body := e.erase("alice", "c", map[string]any{"match": secret})
	if code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("erase: %d %s", code, body)
	}
	e.drainUntil(func() bool { return e.erasure("alice", "c", rec.Erasure).Done }) // the image settled
	rec = e.erasure("alice", "c", rec.Erasure)
	if len(rec.Messages) != 1 || rec.Messages[0].Seq != 1 || rec.ImagesKept != 1 {
		t.Fatalf("receipt: %+v", rec)
	}
	if !e.imageStored("alice", shot) {
		t.Fatal("the image another chat names was deleted")
	}
	if d, err := imgs.Description(t.Context(), "alice", name); err == nil || strings.Contains(d, secret) {
		t.Errorf("the kept image's description is still %q (%v)", d, err)
	}
}
