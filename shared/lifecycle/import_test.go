package lifecycle_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/durachat/durachat/shared/images/imagestest"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// postImport posts an import file and returns the answer.
func (e *env) postImport(tenant, chat string, file []byte) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.url+"/v1/chats/"+chat+"/import", bytes.NewReader(file))
	req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(res.Body)
	return res.StatusCode, body.Bytes()
}

// exportLines joins lines into an import file.
func exportLines(t *testing.T, lines ...any) []byte {
	t.Helper()
	var out []byte
	for _, l := range lines {
		raw, ok := l.(string)
		if !ok {
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			raw = string(b)
		}
		out = append(out, raw...)
		out = append(out, '\n')
	}
	return out
}

func messageLine(seq int, msg any) map[string]any { return map[string]any{"seq": seq, "message": msg} }

// refBlocksMessage is a user message of one ref block per name.
func refBlocksMessage(names ...string) map[string]any {
	var content []map[string]any
	for _, n := range names {
		content = append(content, map[string]any{"type": "text", "text": refs.Ref(n)})
	}
	return map[string]any{"role": "user", "timestamp": 1_700_000_000_000, "content": content}
}

func imageLine(name, b64 string) map[string]any {
	return map[string]any{"image": map[string]any{"name": name, "mimeType": "image/png", "data": b64}}
}

// TestAnImportWithABadLineLogsNothingAndNamesTheLine: a file of 120
// lines with one bad line is refused whole, naming that line of the file
// (not a place in an append), and nothing of it is logged; the fixed file
// then imports whole.
func TestAnImportWithABadLineLogsNothingAndNamesTheLine(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			shot := pngB64(t, color.RGBA{1, 2, 3, 255})
			tests := []struct {
				name  string
				bad   any
				field string
			}{
				{"a ref to no image", messageLine(109, refBlocksMessage("0123456789abcdef")), "line 110 message.content[0]"},
				{"a message with no role", messageLine(109, map[string]any{"content": "x"}), "line 110 message.role"},
				{"an image block that is no image", messageLine(109, map[string]any{"role": "user", "content": []map[string]any{{"type": "image", "data": "bm90IGFuIGltYWdl"}}}), "line 110 message.content[0].data"},
				{"an image line that is no image", imageLine(images.Name(shot), "bm90IGFuIGltYWdl"), "line 110 image.data"},
				{"an image line whose name is none", imageLine("../x", shot), "line 110 image.name"},
				{"a content of the wrong type", messageLine(109, map[string]any{"role": "user", "content": 5}), "line 110 message.content"},
				// A message is logged as the file has it: bytes that are
				// not UTF-8 would read back as no JSON at all.
				{"a content not UTF-8", "{\"seq\":109,\"message\":{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}}", "line 110 message.content"},
				{"a block's field not UTF-8", "{\"seq\":109,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\",\"note\":\"\xc3(\"}]}}", "line 110 message.content[0].note"},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					chat := fmt.Sprintf("bad%d", i)
					var lines []any
					for n := range 120 {
						lines = append(lines, messageLine(n, user(fmt.Sprintf("message %d", n))))
					}
					lines[109] = tt.bad
					code, body := e.postImport("alice", chat, exportLines(t, lines...))
					var answer struct {
						Error struct{ Field, Message string }
					}
					_ = json.Unmarshal(body, &answer)
					if code != http.StatusBadRequest || answer.Error.Field != tt.field || !strings.HasPrefix(answer.Error.Message, tt.field+": ") {
						t.Fatalf("import = %d %s, want 400 naming %q", code, body, tt.field)
					}
					if p := e.messages("alice", chat, ""); len(p.Messages) != 0 {
						t.Fatalf("a refused import logged %d messages", len(p.Messages))
					}
					lines[109] = messageLine(109, user("message 109"))
					if r := e.importFile("alice", chat, exportLines(t, lines...)); r.Messages != 120 || r.Entries != 120 {
						t.Fatalf("the fixed file imported as %+v, want 120 entries", r)
					}
				})
			}
		})
	}
}

// TestAnImportCannotBindANameToOtherBytes: an image line, or an image
// block, that carries the name of other bytes is stored under its own
// name, its refs follow it, and the name still means its own bytes for
// every later request: an after-tool of the genuine image stores it, and
// it reads back as itself.
func TestAnImportCannotBindANameToOtherBytes(t *testing.T) {
	t.Parallel()
	for i, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			imgs := images.New(b.Blobs)
			// Images of their own for each backend: dynalite's shares the
			// aws backend's bucket.
			genuine := pngB64(t, color.RGBA{200, 0, 0, uint8(255 - i)})
			forged := pngB64(t, color.RGBA{0, 0, 200, uint8(255 - i)})
			name, forgedName := images.Name(genuine), images.Name(forged)
			for _, tt := range []struct {
				name string
				file []byte
			}{
				{"an image line", exportLines(t, imageLine(name, forged), messageLine(0, refBlocksMessage(name)))},
				{"an image block", exportLines(t, messageLine(0, map[string]any{"role": "user", "timestamp": 1, "content": []map[string]any{
					{"type": "image", "name": name, "mimeType": "image/png", "data": forged}}}))},
			} {
				t.Run(tt.name, func(t *testing.T) {
					chat := strings.ReplaceAll(tt.name, " ", "-")
					r := e.importFile("bob", chat, tt.file)
					if r.Entries != 1 {
						t.Fatalf("import = %+v", r)
					}
					if _, err := imgs.Get(t.Context(), "bob", name); err == nil {
						t.Fatalf("the import stored bytes under %s, the name of other bytes", name)
					}
					if got := e.messages("bob", chat, ""); len(got.Messages) != 1 || !strings.Contains(string(got.Messages[0].Message), refs.Ref(forgedName)) {
						t.Fatalf("read back %+v, want the ref to the bytes' own name %s", got, forgedName)
					}
					// The genuine image, stored as after-tool stores it, is itself.
					if n, err := imgs.Put(t.Context(), "bob", genuine); err != nil || n != name {
						t.Fatalf("put = %s %v", n, err)
					}
					img, err := imgs.Get(t.Context(), "bob", name)
					if err != nil || base64.StdEncoding.EncodeToString(img.Data) != genuine {
						t.Fatalf("image %s reads back as other bytes (%v)", name, err)
					}
					if err := b.Blobs.Delete(t.Context(), store.ImageKey("bob", name)); err != nil {
						t.Fatal(err)
					}
				})
			}
			if r := e.importFile("bob", "line", exportLines(t, imageLine(name, forged), messageLine(0, refBlocksMessage(name)))); r.Renamed[name] != forgedName {
				t.Fatalf("import = %+v, want %s renamed to %s", r, name, forgedName)
			}
		})
	}
}

// TestAShrunkImageExportedByAnotherTenantImportsUnderItsOwnName: the name
// of a shrunk image is that of bytes no longer stored, so another tenant
// cannot be shown they are its; the image is stored under its own name
// and every ref follows. The tenant that holds the bytes keeps the name.
func TestAShrunkImageExportedByAnotherTenantImportsUnderItsOwnName(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			wide := noisyPNG(t, 1, 2100, 8) // wider than MaxSide: shrunk
			name := images.Name(wide)
			e.append("alice", "src", withImage("wide", wide))
			e.append("alice", "src", refBlocksMessage(name))
			file := e.export("alice", "src")
			if r := e.importFile("alice", "mine", file); len(r.Renamed) != 0 {
				t.Fatalf("alice's own import renamed %v", r.Renamed)
			}
			if again := e.export("alice", "mine"); !bytes.Equal(again, file) {
				t.Fatalf("alice's import exports as\n%.500s\nwant\n%.500s", again, file)
			}
			r := e.importFile("bob", "copy", file)
			own := r.Renamed[name]
			if !refs.ValidName(own) || own == name {
				t.Fatalf("bob's import = %+v, want %s renamed", r, name)
			}
			want := bytes.ReplaceAll(file, []byte(name), []byte(own))
			if again := e.export("bob", "copy"); !bytes.Equal(again, want) {
				t.Fatalf("bob's import exports as\n%.500s\nwant\n%.500s", again, want)
			}
		})
	}
}

// TestAnExportPartStaysWithinItsBudgetWhateverTheRefs: a message of 999
// ref blocks to one image carries the image once; a message naming more
// images than a part holds is spread over parts, each within the budget;
// and the export imports back to the same export.
func TestAnExportPartStaysWithinItsBudgetWhateverTheRefs(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			one := noisyPNG(t, 7, 260, 260) // about 264 KiB of base64
			e.append("alice", "refs", withImage("the image", one))
			var many []string
			for range 999 {
				many = append(many, images.Name(one))
			}
			e.append("alice", "refs", refBlocksMessage(many...))
			file, parts := e.exportParts("alice", "refs")
			if n := bytes.Count(file, []byte(`{"image":`)); n != 1 || len(parts) != 1 {
				t.Fatalf("the export carries the image %d times in %d parts, want once in one", n, len(parts))
			}

			// Twelve images of about 507 KiB of base64 each, named by one
			// message: more than one part holds.
			var distinct []string
			for i := range 12 {
				img := noisyPNG(t, uint64(100+i), 360, 360)
				e.append("alice", "wide", withImage(fmt.Sprintf("image %d", i), img))
				distinct = append(distinct, images.Name(img))
			}
			e.append("alice", "wide", refBlocksMessage(distinct...))
			file, parts = e.exportParts("alice", "wide")
			if len(parts) < 3 {
				t.Fatalf("%d parts, want the images spread over several", len(parts))
			}
			for i, p := range parts {
				if len(p) > lifecycle.PageBudget+1<<20 {
					t.Errorf("part %d is %d bytes, over its budget of about %d", i, len(p), lifecycle.PageBudget)
				}
			}
			// More than one request takes: imported whole, as durachat
			// import does into a data directory.
			items, _, err := importfile.Parse(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := e.chats.Import(t.Context(), "bob", "wide", items)
			if err != nil || r.Entries != 13 || len(r.Renamed) != 0 {
				t.Fatalf("import = %+v, %v", r, err)
			}
			if again := e.export("bob", "wide"); !bytes.Equal(again, file) {
				t.Fatal("the export does not import back to the same export")
			}
		})
	}
}

// TestAnExportWhoseFirstMessagesImagesSpanPartsReadsToTheEnd: when the
// chat's first message names more images than a part holds, the first
// parts carry only images and hand out the after of a part before the
// first message ("-1.<n>"); passed back, each is taken, and the parts
// together are the whole chat exactly: every image once, before the
// message that names it, each message as logged, and an export that
// imports back to the same export.
func TestAnExportWhoseFirstMessagesImagesSpanPartsReadsToTheEnd(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			// Twenty images of about 507 KiB of base64 each, which the
			// tenant holds from another chat: three parts' worth.
			var distinct []string
			for i := range 20 {
				img := noisyPNG(t, uint64(200+i), 360, 360)
				e.append("alice", "album", withImage(fmt.Sprintf("image %d", i), img))
				distinct = append(distinct, images.Name(img))
			}
			first, last := refBlocksMessage(distinct...), user("that is all")
			e.append("alice", "first", first, last)

			file, parts := e.exportParts("alice", "first")
			if len(parts) < 3 || bytes.Contains(parts[0], []byte(`"seq":`)) || bytes.Contains(parts[1], []byte(`"seq":`)) {
				t.Fatalf("%d parts, want the first message's images spread over the first two and more", len(parts))
			}
			var carried []string
			var msgs []string
			for i, line := range bytes.Split(bytes.TrimSuffix(file, []byte("\n")), []byte("\n")) {
				var l struct {
					Seq     *int64
					Message json.RawMessage
					Image   *lifecycle.ExportedImage
				}
				if err := json.Unmarshal(line, &l); err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				switch {
				case l.Image != nil:
					if len(msgs) > 0 {
						t.Fatalf("line %d: an image after the message naming it", i+1)
					}
					code, stored := e.do("alice", "GET", "/v1/chats/first/images/"+l.Image.Name, nil)
					if code != http.StatusOK || l.Image.Data != base64.StdEncoding.EncodeToString(stored) {
						t.Fatalf("line %d: image %s is not the stored one", i+1, l.Image.Name)
					}
					carried = append(carried, l.Image.Name)
				case l.Seq != nil && *l.Seq == int64(len(msgs)):
					msgs = append(msgs, string(l.Message))
				default:
					t.Fatalf("line %d is neither an image nor the next message: %.200s", i+1, line)
				}
			}
			if !slices.Equal(carried, distinct) {
				t.Fatalf("the parts carry the images %v, want each of %v once, in order", carried, distinct)
			}
			want := []string{string(mustJSON(t, first)), string(mustJSON(t, last))}
			if !jsonEqualLines(msgs, want) {
				t.Fatalf("the parts hold the messages\n%.300s\nwant\n%.300s", msgs, want)
			}
			items, _, err := importfile.Parse(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := e.chats.Import(t.Context(), "bob", "first", items); err != nil || r.Entries != 2 {
				t.Fatalf("import = %+v, %v", r, err)
			}
			if again := e.export("bob", "first"); !bytes.Equal(again, file) {
				t.Fatal("the export does not import back to the same export")
			}
		})
	}
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// exportParts reads the chat's whole export and each part of it.
func (e *env) exportParts(tenant, chat string) ([]byte, [][]byte) {
	e.t.Helper()
	var all []byte
	var parts [][]byte
	after := ""
	for range 1000 {
		req, _ := http.NewRequestWithContext(e.t.Context(), "GET", e.url+"/v1/chats/"+chat+"/export?after="+after, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens[tenant])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			e.t.Fatalf("export after %q: %d %.300s", after, res.StatusCode, body.Bytes())
		}
		all = append(all, body.Bytes()...)
		parts = append(parts, body.Bytes())
		if after = res.Header.Get(lifecycle.ExportNextHeader); after == "" {
			return all, parts
		}
	}
	e.t.Fatal("the export did not end")
	return nil, nil
}

// noisyPNG is imagestest.NoisyPNG in base64.
func noisyPNG(t *testing.T, seed uint64, w, h int) string {
	t.Helper()
	return base64.StdEncoding.EncodeToString(imagestest.NoisyPNG(seed, w, h))
}

// TestAnImportCutOffByAnOutageSaysHowFarItGotAndARerunCompletesIt: an
// outage while the third append of a 120-line file is written answers 503
// with Retry-After, saying which lines are logged; importing the same file
// again logs the rest, and nothing twice.
func TestAnImportCutOffByAnOutageSaysHowFarItGotAndARerunCompletesIt(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var down atomic.Bool
			down.Store(true)
			third := fmt.Sprintf("e/%016d", 2*lifecycle.ImportAppendMessages) // the first entry of the third append
			b.Table = &testenv.FailingTable{Table: b.Table, FailCreate: func(k store.Key) error {
				if down.Load() && k.SK == third {
					return testenv.KeyOutage(k)
				}
				return nil
			}}
			e := newEnv(t, b, 0)
			var lines []any
			for n := range 120 {
				lines = append(lines, messageLine(n, user(fmt.Sprintf("message %d", n))))
			}
			file := exportLines(t, lines...)
			code, body := e.postImport("alice", "cut", file)
			if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "before line 101 are logged (100 entries)") {
				t.Fatalf("import = %d %s, want a 503 saying lines 1-100 are logged", code, body)
			}
			if p := e.messages("alice", "cut", "?limit=100"); len(p.Messages) != 100 {
				t.Fatalf("%d messages logged, want the 100 of the first two appends", len(p.Messages))
			}
			down.Store(false)
			if r := e.importFile("alice", "cut", file); r.Entries != 120 {
				t.Fatalf("the rerun = %+v, want 120 entries", r)
			}
			seen := 0
			for after := ""; ; {
				p := e.messages("alice", "cut", "?limit=100"+after)
				seen += len(p.Messages)
				if p.Next == "" {
					break
				}
				after = "&after=" + p.Next
			}
			if seen != 120 {
				t.Fatalf("the chat holds %d messages after the rerun, want 120", seen)
			}
		})
	}
}

// TestAZoomResultsImageOfOtherBytesIsNotTakenForTheNameItCarries: a zoom
// result whose page names an image, carrying other bytes under that name,
// neither binds the name to them (the name not held) nor has them replaced
// by the name's image (the name held): they are stored under their own
// name and read back as sent.
func TestAZoomResultsImageOfOtherBytesIsNotTakenForTheNameItCarries(t *testing.T) {
	t.Parallel()
	for i, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b, 0)
			imgs := images.New(b.Blobs)
			// Images of their own for each backend: dynalite's shares the
			// aws backend's bucket.
			genuine := pngB64(t, color.RGBA{9, 9, 200, uint8(255 - i)})
			forged := pngB64(t, color.RGBA{200, 9, 9, uint8(255 - i)})
			name := images.Name(genuine)
			zoom := map[string]any{"role": "toolResult", "toolName": "zoom", "toolCallId": "z1", "timestamp": 1_700_000_003_000,
				"content": []map[string]any{
					{"type": "text", "text": "0|user: look " + refs.Ref(name)},
					{"type": "image", "data": forged, "mimeType": "image/png", "name": name}}}
			for _, held := range []bool{false, true} {
				chat := fmt.Sprintf("held-%v", held)
				if held {
					e.append("alice", "src", withImage("look", genuine))
				}
				e.append("alice", chat, zoom)
				img, err := imgs.Get(t.Context(), "alice", name)
				if held && (err != nil || base64.StdEncoding.EncodeToString(img.Data) != genuine) {
					t.Fatalf("held: image %s is no longer itself (%v)", name, err)
				}
				if !held && err == nil {
					t.Fatalf("not held: the zoom result bound %s to other bytes", name)
				}
				got := e.messages("alice", chat, "?images=inline")
				if len(got.Messages) != 1 || !strings.Contains(string(got.Messages[0].Message), forged) {
					t.Fatalf("held %v: read back %d messages (%.300s), want the bytes sent", held, len(got.Messages), fmt.Sprint(got.Messages))
				}
			}
		})
	}
}

// TestAPi1SessionImportsItsBranchAndCountsWhatItSkips: a pi 1.x session
// as pi writes it (its system message first, a "!" command's bash
// execution, a model change; entries of pi 1.6's SessionEntry union,
// @earendil-works/pi-coding-agent's session-manager.d.ts) imports its
// user, assistant and tool-result messages, and the answer counts the
// rest by kind.
func TestAPi1SessionImportsItsBranchAndCountsWhatItSkips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testenv.Embedded(t), 0)
	shot := pngB64(t, color.RGBA{9, 8, 7, 255})
	entry := func(id, parent string, fields map[string]any) map[string]any {
		fields["id"], fields["timestamp"] = id, "2026-12-01T10:00:00.000Z"
		fields["parentId"] = nil
		if parent != "" {
			fields["parentId"] = parent
		}
		return fields
	}
	msg := func(id, parent string, m map[string]any) map[string]any {
		return entry(id, parent, map[string]any{"type": "message", "message": m})
	}
	file := exportLines(t,
		map[string]any{"type": "session", "version": 3, "id": "s1", "timestamp": "2026-12-01T10:00:00.000Z", "cwd": "/p"},
		msg("1", "", map[string]any{"role": "system", "content": "You are pi.", "toolsAdded": []any{}, "timestamp": 1}),
		entry("2", "1", map[string]any{"type": "model_change", "provider": "faux", "modelId": "faux-1"}),
		msg("3", "2", map[string]any{"role": "bashExecution", "command": "ls", "output": "a.go", "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 2}),
		msg("4", "3", user("take a screenshot")),
		msg("5", "4", map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": "c1", "name": "screenshot", "arguments": map[string]any{}}}, "stopReason": "toolUse", "timestamp": 3}),
		msg("6", "5", map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "screenshot", "isError": false, "timestamp": 4,
			"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": shot}}}),
		msg("7", "6", map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "a gray square"}}, "stopReason": "stop", "timestamp": 5}),
	)
	r := e.importFile("alice", "pi1", file)
	want := map[string]int{"message/system": 1, "model_change": 1, "message/bashExecution": 1}
	if r.Messages != 4 || r.Entries != 4 || r.Skipped != 3 || !maps.Equal(r.SkippedByKind, want) {
		t.Fatalf("import = %+v, want 4 messages, 4 entries, skipped %v", r, want)
	}
	if p := e.messages("alice", "pi1", ""); len(p.Messages) != 4 {
		t.Fatalf("the chat holds %d messages, want 4", len(p.Messages))
	}
}

// A Codex CLI rollout and a Claude Code session import through the route
// as the CLI imports them, what has no chat meaning counted by kind; a
// file no format reads is a 400 at its first line naming what was found,
// never "imported 0 messages".
func TestAHostsSessionFileImportsAndAnUnknownFileIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testenv.Embedded(t), 0)
	for _, tc := range []struct {
		name, file string
		status     int
		want       string // in the answer
	}{
		{"codex", `{"timestamp":"2026-12-01T10:00:00.000Z","type":"session_meta","payload":{"id":"x","cwd":"/w"}}` + "\n" +
			`{"timestamp":"2026-12-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`,
			http.StatusOK, `"skippedByKind":{"session_meta":1}`},
		{"claude", `{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2026-12-01T10:00:00.000Z"}`,
			http.StatusOK, `"messages":1`},
		{"unknown", `{"event":"started","at":1}`, http.StatusBadRequest, `"field":"line 1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.postImport("alice", tc.name, []byte(tc.file))
			if code != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("import = %d %s, want %d with %s", code, body, tc.status, tc.want)
			}
		})
	}
}
