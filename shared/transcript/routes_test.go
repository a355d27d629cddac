package transcript

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv/logkeys"
)

// notes records Appended calls, failing when err is set.
type notes struct {
	mu      sync.Mutex
	lengths []int64
	err     error
}

func (n *notes) Appended(_ context.Context, _ chatid.Chat, length int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lengths = append(n.lengths, length)
	return n.err
}

// server serves the routes as tenant.
func (f *fixture) server(t testing.TB, n Notifier) *httptest.Server {
	mux := http.NewServeMux()
	NewRoutes(f.log, f.imgs, n).Register(mux)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tn := r.Header.Get("X-Test-Tenant")
		if tn == "" {
			tn = tenant
		}
		mux.ServeHTTP(w, r.WithContext(api.WithTenant(r.Context(), tn)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errorField() string {
	var e struct {
		Error struct{ Field string } `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	return e.Error.Field
}

func do(t testing.TB, method, url, body string, header ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// TestAppendRouteAnswersIds: POST /messages logs pi messages and answers
// their ids; memory is told the new length.
func TestAppendRouteAnswersIds(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		n := &notes{}
		srv := f.server(t, n)
		body := `{"receipt":"k1","messages":[{"role":"user","content":"hi","timestamp":1700000000000},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"hello"},{"type":"toolCall","id":"1","name":"ls","arguments":{}}],"api":"x","usage":{"input":1}}]}`
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"ids":[0,1,2]}` {
			t.Fatalf("%d %s", a.status, a.body)
		}
		a = do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		if a.status != 200 || strings.TrimSpace(string(a.body)) != `{"ids":[0,1,2]}` {
			t.Fatalf("retry: %d %s", a.status, a.body)
		}
		if got := texts(f.all(t)); !slices.Equal(got, []string{"user|hi", "talk|hello", "tool|ls {}"}) {
			t.Fatalf("entries %q", got)
		}
		if !slices.Equal(n.lengths, []int64{3, 3}) {
			t.Fatalf("notified %v", n.lengths)
		}
	})
}

// TestReceiptReusedWithOtherMessagesIs409: the route answers a receipt
// reused for another request with 409 conflict naming "receipt"; the same
// request again still answers its ids.
func TestReceiptReusedWithOtherMessagesIs409(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, nil)
		body := `{"receipt":"k","messages":[{"role":"user","content":"x"}]}`
		if a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body); a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", `{"receipt":"k","messages":[{"role":"user","content":"y"}]}`)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(a.body, &e)
		if a.status != 409 || e.Error.Code != "conflict" || a.errorField() != "receipt" {
			t.Fatalf("got %d %s, want 409 conflict on receipt", a.status, a.body)
		}
		if a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"ids":[0]}` {
			t.Fatalf("same request again: %d %s", a.status, a.body)
		}
	})
}

// TestAnAppendsRefusalNamesTheFieldAndWhatIsWrong pins whole error
// answers of the append: the field's path, what is wrong with it and, for
// an image or a receipt, the cause after it.
func TestAnAppendsRefusalNamesTheFieldAndWhatIsWrong(t *testing.T) {
	img := func(data string) string {
		return `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","mimeType":"image/png","data":"` + data + `"}]}]}`
	}
	tests := []struct {
		name, body string
		status     int
		answer     string
	}{
		{"a role that is none", `{"messages":[{"role":"robot","content":"x"}]}`, 400,
			`{"error":{"code":"bad_request","field":"messages[0].role","message":"messages[0].role \"robot\" is not user, assistant or toolResult"}}`},
		{"a block without its type", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}`, 400,
			`{"error":{"code":"bad_request","field":"messages[0].content[1].type","message":"messages[0].content[1].type is required"}}`},
		{"no message", `{"messages":[]}`, 400,
			`{"error":{"code":"bad_request","field":"messages","message":"messages: at least one message is required"}}`},
		{"an image that is not base64", img("!!!"), 400,
			`{"error":{"code":"bad_request","field":"messages[0].content[1].data","message":"messages[0].content[1].data: is not valid base64: image: invalid base64: illegal base64 data at input byte 0"}}`},
		{"an image that is a PDF", img(base64.StdEncoding.EncodeToString([]byte("%PDF-1.7 a document"))), 400,
			`{"error":{"code":"bad_request","field":"messages[0].content[1].data","message":"messages[0].content[1].data: is not a whole PNG, JPEG, GIF or WebP image: image: unsupported image: PDF (want PNG, JPEG, GIF or WebP)"}}`},
		{"a receipt used for other messages", `{"receipt":"k","messages":[{"role":"user","content":"y"}]}`, 409,
			`{"error":{"code":"conflict","field":"receipt","message":"receipt: \"k\" was used for an earlier append of other messages: receipt already used for different messages"}}`},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, nil)
		if a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", `{"receipt":"k","messages":[{"role":"user","content":"x"}]}`); a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		for _, tt := range tests {
			a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", tt.body)
			if got := strings.TrimSpace(string(a.body)); a.status != tt.status || got != tt.answer {
				t.Errorf("%s: answered %d %s, want %d %s", tt.name, a.status, got, tt.status, tt.answer)
			}
		}
	})
}

// TestNotifierFailureDoesNotFailTheAppend: the entries are durable; a
// notifier error is logged, not answered.
func TestNotifierFailureDoesNotFailTheAppend(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, &notes{err: errors.New("memory down")})
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", `{"receipt":"k","messages":[{"role":"user","content":"x"}]}`)
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
}

// TestAppendWithoutReceiptGetsItsOwnIds: the receipt is optional; without
// one, each append is a new one (a retry cannot be recognised).
func TestAppendWithoutReceiptGetsItsOwnIds(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, nil)
		body := `{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		b := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		if a.status != 200 || b.status != 200 {
			t.Fatalf("%d %s / %d %s", a.status, a.body, b.status, b.body)
		}
		if !strings.Contains(string(a.body), `[0,1]`) || !strings.Contains(string(b.body), `[2,3]`) {
			t.Fatalf("ids %s then %s, want [0,1] then [2,3]", a.body, b.body)
		}
	})
}

// TestBadAppendIs400NamingTheField: each kind of bad input is a 400 whose
// error names the field, and nothing is written.
func TestBadAppendIs400NamingTheField(t *testing.T) {
	png := pngB64(t, 7, 4, 4)
	notImage := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 not an image at all"))
	cases := []struct {
		name, body, field string
	}{
		{"NotJSON", `{"messages":`, ""},
		{"NoMessages", `{"receipt":"k"}`, "messages"},
		{"EmptyMessages", `{"receipt":"k","messages":[]}`, "messages"},
		{"MessagesNotAList", `{"receipt":"k","messages":{}}`, "messages"},
		{"BadRole", `{"receipt":"k","messages":[{"role":"user","content":"a"},{"role":"system","content":"b"}]}`, "messages[1].role"},
		{"MissingRole", `{"receipt":"k","messages":[{"content":"b"}]}`, "messages[0].role"},
		{"NullMessage", `{"receipt":"k","messages":[null]}`, "messages[0].role"},
		{"BadContent", `{"receipt":"k","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"BlockWithoutType", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}`, "messages[0].content[1].type"},
		{"UnknownBlockType", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"audio"}]}]}`, "messages[0].content[0].type"},
		{"InvalidBase64", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"` + png + `"}]},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image","mimeType":"image/png","data":"@@@not base64@@@"}]}]}`, "messages[1].content[1].data"},
		{"NotAnImage", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"` + notImage + `"}]}]}`, "messages[0].content[0].data"},
		{"EmptyImage", `{"receipt":"k","messages":[{"role":"toolResult","toolName":"t","content":[{"type":"image","mimeType":"image/png"}]}]}`, "messages[0].content[0].data"},
		{"ToolResultWithoutToolName", `{"receipt":"k","messages":[{"role":"toolResult","content":"x"}]}`, "messages[0].toolName"},
		{"ToolCallInUserMessage", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"toolCall","name":"x"}]}]}`, "messages[0].content[0].type"},
		{"BadKind", `{"receipt":"k","messages":[{"role":"user","kind":"echo","content":"x"}]}`, "messages[0].kind"},
		{"ReceiptNotAString", `{"receipt":5,"messages":[{"role":"user","content":"x"}]}`, "receipt"},
		{"ReceiptTooLong", `{"receipt":"` + strings.Repeat("k", MaxReceiptBytes+1) + `","messages":[{"role":"user","content":"x"}]}`, "receipt"},
		// JSON text is UTF-8: the message would read back as bytes no
		// JSON parser takes.
		{"ContentNotUTF8", "{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}]}", "messages[0].content"},
		{"BlockTextNotUTF8", `{"receipt":"k","messages":[{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"` + png + "\"},{\"type\":\"text\",\"text\":\"\xc3(\"}]}]}", "messages[0].content[1].text"},
		{"FieldOfItsOwnNotUTF8", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"toolResult\",\"toolName\":\"t\",\"content\":\"x\",\"details\":{\"out\":[\"\xed\xa0\x80\"]}}]}", "messages[1].details.out[0]"},
		{"KeyNotUTF8", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"k\xff\":1}]}", "messages[0]"},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, nil)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", c.body)
				if a.status != 400 || a.errorField() != c.field {
					t.Fatalf("got %d field %q (%s), want 400 field %q", a.status, a.errorField(), a.body, c.field)
				}
			})
		}
		if w := f.table.writes(); len(w) != 0 {
			t.Fatalf("bad input wrote %d rows", len(w))
		}
		if a := do(t, "POST", srv.URL+"/v1/chats/bad%2Fchat/messages", `{}`); a.status != 400 || a.errorField() != "chat" {
			t.Fatalf("bad chat id: %d %s", a.status, a.body)
		}
	})
}

// TestStoreOutageOnAppendIs503: a failing table or image store answers 503
// with Retry-After and writes no row.
func TestStoreOutageOnAppendIs503(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		srv := f.server(t, nil)
		body := `{"receipt":"k","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image","mimeType":"image/png","data":"` + pngB64(t, 8, 4, 4) + `"}]}]}`
		f.table.setFail(func(op string, k store.Key) error { return outage(op) })
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		if a.status != 503 || a.header.Get("Retry-After") == "" {
			t.Fatalf("table down: %d %s", a.status, a.body)
		}
		f.table.setFail(nil)
		f.blobs.setFail(func(op, key string) error { return outage(op) })
		a = do(t, "POST", srv.URL+"/v1/chats/c1/messages", body)
		if a.status != 503 || a.header.Get("Retry-After") == "" {
			t.Fatalf("blobs down: %d %s", a.status, a.body)
		}
		if w := f.table.writes(); len(w) != 0 {
			t.Fatalf("%d rows written", len(w))
		}
		f.blobs.setFail(nil)
		if a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", body); a.status != 200 {
			t.Fatalf("after the outage: %d %s", a.status, a.body)
		}
		if n := len(f.all(t)); n != 1 {
			t.Fatalf("%d entries", n)
		}
	})
}

// TestImageRouteServesStoredBytes: GET /images/{name} answers the bytes
// with their type and a cache policy that asks again before each use (the
// chat may stop naming the image); unknown, another
// tenant's, malformed and unavailable images each get their answer.
func TestImageRouteServesStoredBytes(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		b64 := pngB64(t, 11, 5, 5)
		name, err := f.imgs.Put(ctx, tenant, b64)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := base64.StdEncoding.DecodeString(b64)
		srv := f.server(t, nil)
		url := srv.URL + "/v1/chats/c1/images/"

		a := do(t, "GET", url+name, "")
		if a.status != 200 || !bytes.Equal(a.body, want) || a.header.Get("Content-Type") != images.PNG {
			t.Fatalf("%d %s %d bytes", a.status, a.header.Get("Content-Type"), len(a.body))
		}
		if cc := a.header.Get("Cache-Control"); cc != "private, no-cache" {
			t.Errorf("Cache-Control %q", cc)
		}
		if a := do(t, "GET", url+"0000000000000000", ""); a.status != 404 {
			t.Errorf("unknown: %d %s", a.status, a.body)
		}
		if a := do(t, "GET", url+name, "", "X-Test-Tenant", "other"); a.status != 404 {
			t.Errorf("another tenant's: %d %s", a.status, a.body)
		}
		for _, bad := range []string{"ABCDEF0123456789", "abc", "0123456789abcdef0"} {
			if a := do(t, "GET", url+bad, ""); a.status != 400 || a.errorField() != "name" {
				t.Errorf("malformed %q: %d %s", bad, a.status, a.body)
			}
		}
		f.blobs.setFail(func(op, key string) error { return outage(op) })
		if a := do(t, "GET", url+name, ""); a.status != 503 || a.header.Get("Retry-After") == "" {
			t.Errorf("outage: %d %s", a.status, a.body)
		}
	})
}

// TestAnAppendsRecordsNameEachKeyOnce: served as every program serves it
// (the request's logger names the tenant), an append whose notice to
// memory fails logs records that hold each key once.
func TestAnAppendsRecordsNameEachKeyOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		var logs bytes.Buffer
		h, err := api.NewHandler(api.Options{
			Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			Auth:   api.BearerTokens(map[string]string{"tok": tenant}),
			Routes: []api.Routes{NewRoutes(f.log, f.imgs, &notes{err: errors.New("memory is down")})},
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		a := do(t, "POST", srv.URL+"/v1/chats/c1/messages", `{"receipt":"k1","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer tok")
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		msgs := map[string]bool{}
		for _, rec := range logkeys.Check(t, logs.Bytes()) {
			msgs[rec["msg"].(string)] = true
			if rec["tenant"] != tenant {
				t.Errorf("record %v does not name the tenant", rec)
			}
		}
		if !msgs["request"] || !msgs["append: notifying memory failed"] {
			t.Fatalf("records %v, want the request and the failed notice", msgs)
		}
	})
}

// TestAMessageNotUTF8IsRefusedHoweverItArrives: a message that did not
// come in a request body (an import file's line, a tool call's arguments)
// is refused by the log itself, naming the string, before an image of the
// append is stored or a row written: the log records a message as sent,
// and bytes that are not UTF-8 would read back as no JSON at all.
func TestAMessageNotUTF8IsRefusedHoweverItArrives(t *testing.T) {
	png := pngB64(t, 3, 4, 4)
	tests := []struct {
		name  string
		msgs  []string
		field string
	}{
		{"content", []string{"{\"role\":\"user\",\"content\":\"bad \xff\xfe x\",\"timestamp\":1}"}, "messages[0].content"},
		{"a block after an image", []string{
			`{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"` + png + `"}]}`,
			"{\"role\":\"assistant\",\"content\":[{\"type\":\"toolCall\",\"id\":\"1\",\"name\":\"x\",\"arguments\":{\"q\":\"\xc0\xaf\"}}]}",
		}, "messages[1].content[0].arguments.q"},
		{"a key", []string{"{\"role\":\"user\",\"content\":\"x\",\"\xfe\":1}"}, "messages[0]"},
	}
	eachBackend(t, func(t *testing.T, f *fixture) {
		for _, tt := range tests {
			msgs := make([]pi.Message, len(tt.msgs))
			for i, m := range tt.msgs {
				if err := json.Unmarshal([]byte(m), &msgs[i]); err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
			}
			_, err := f.log.Append(context.Background(), tenant, chat, msgs, "k-"+tt.name)
			if fe, ok := errors.AsType[*fault.Error](err); !ok || fe.Code != fault.BadRequest || fe.Field != tt.field || !strings.HasPrefix(fe.Message, tt.field+": ") {
				t.Errorf("%s: %v, want a 400 naming %s", tt.name, err, tt.field)
			}
		}
		if w := f.table.writes(); len(w) != 0 {
			t.Fatalf("refused messages wrote %d rows", len(w))
		}
		if n := f.blobs.keysWithPrefix(""); n != 0 {
			t.Fatalf("refused messages stored %d blobs", n)
		}
	})
}
