package client_test

import (
	"bytes"
	"image/color"
	"net/http"
	"strings"
	"testing"

	"github.com/durachat/durachat/client"
)

func TestChatsListsTheChatsOfAServerOfItsOwn(t *testing.T) {
	c := ownServer(t)
	ctx := testCtx(t)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Chat(id).Append(ctx, "r-"+id, client.UserText("hello "+id)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Chats(ctx, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Chats) != 2 || page.Chats[0].Chat != "a" || page.Chats[0].Messages != 1 || page.Next != "b" {
		t.Fatalf("first page = %+v, want a, b with one message each and next b", page)
	}
	page, err = c.Chats(ctx, page.Next, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Chats) != 1 || page.Chats[0].Chat != "c" || page.Next != "" {
		t.Fatalf("second page = %+v, want c alone", page)
	}
	if _, err := c.Chats(ctx, "", 1000); asAPIError(t, err).Status != http.StatusBadRequest {
		t.Fatalf("a limit of 1000 = %v, want 400", err)
	}
}

func TestMessagesReadTheChatBackWithLinksAndDeleteEmptiesIt(t *testing.T) {
	ctx, chat := testCtx(t), chatFor(t)
	shot := screenshot(color.RGBA{10, 200, 30, 255})
	msgs := []any{
		client.UserText("look"),
		client.Message{Role: "user", Content: client.Content{client.Image(shot, "image/png")}, Timestamp: 1_700_000_000_000},
		map[string]any{"role": "assistant", "content": []client.Block{client.Text("seen")}, "usage": map[string]any{"input": 3, "cost": map[string]any{"total": 0.25}}},
	}
	if _, err := chat.Append(ctx, "read-back", msgs...); err != nil {
		t.Fatal(err)
	}
	page, err := chat.Messages(ctx, client.ReadOptions{Limit: 2, Links: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || page.Next != "1" || page.Messages[0].Message.Content.Text() != "look" {
		t.Fatalf("first page = %+v, want look and the image, next 1", page)
	}
	ref := page.Messages[1].Message.Content[0]
	if _, ok := client.RefName(ref); !ok || ref.URL == "" || page.Messages[1].Message.Timestamp != 1_700_000_000_000 {
		t.Fatalf("image message = %+v, want a ref block with a link and its own timestamp", page.Messages[1].Message)
	}
	// The test server listens on a port picked at start, which its
	// configured public URL cannot name: fetch the link's path from it.
	link := serverURL + ref.URL[strings.Index(ref.URL, "/v1/"):]
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET the link = %d", res.StatusCode)
	}
	page, err = chat.Messages(ctx, client.ReadOptions{After: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].Message.Role != "assistant" || page.Next != "" {
		t.Fatalf("second page = %+v, want the assistant's reply alone", page)
	}
	if raw := string(page.Messages[0].Raw); !strings.Contains(raw, `"usage":{"cost":{"total":0.25},"input":3}`) {
		t.Fatalf("the reply's JSON = %s, want its usage as logged", raw)
	}

	d, err := chat.Delete(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Deleted || d.Accepted || d.Progress.Images != 1 || d.Chat != chat.ID() {
		t.Fatalf("Delete = %+v, want deleted with its one image", d)
	}
	page, err = chat.Messages(ctx, client.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 0 {
		t.Fatalf("after Delete the chat reads %+v, want nothing", page)
	}
	if res, err := http.Get(link); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("the deleted image's link = %d, want 404", res.StatusCode)
		}
	}
	if ids, err := chat.Append(ctx, "after-delete", client.UserText("anew")); err != nil || len(ids) != 1 || ids[0] != 0 {
		t.Fatalf("append after Delete = %v, %v, want id 0", ids, err)
	}
}

func TestExportThenImportIntoAnotherChatGivesTheSameExport(t *testing.T) {
	ctx, src := testCtx(t), chatFor(t)
	shot := screenshot(color.RGBA{90, 20, 200, 255})
	_, err := src.Append(ctx, "export-src",
		client.Message{Role: "user", Content: client.Content{client.Text("see"), client.Image(shot, "image/png")}, Timestamp: 1_700_000_000_000},
		client.Message{Role: "assistant", Content: client.Content{client.Text("seen")}, Timestamp: 1_700_000_001_000})
	if err != nil {
		t.Fatal(err)
	}
	// A result of 6 MiB: its export line is more than one import part, so
	// Import sends it in pieces.
	_, err = src.Append(ctx, "export-src-big", map[string]any{"role": "toolResult", "toolCallId": "c", "toolName": "read",
		"content": []client.Block{client.Text(strings.Repeat("log line\n", 6<<20/9))}, "isError": false, "details": map[string]any{"bytes": 6 << 20}, "timestamp": 1_700_000_002_000})
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := src.Export(ctx, &first); err != nil {
		t.Fatal(err)
	}
	dst := newClient(t).Chat(src.ID() + "-copy")
	for i, wantNew := range []int{3, 0} { // the second import logs nothing new, and says so
		r, err := dst.Import(ctx, bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if r.Messages != 3 || r.Entries != 3 || r.New != wantNew {
			t.Fatalf("Import %d = %+v, want 3 messages as 3 entries, %d new", i+1, r, wantNew)
		}
	}
	var again bytes.Buffer
	if err := dst.Export(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), again.Bytes()) || bytes.Count(first.Bytes(), []byte("\n")) != 3 {
		t.Fatalf("export after import:\n%.2000s\nwant\n%.2000s", again.Bytes(), first.Bytes())
	}
}

func TestRetentionSettingsReadBackAsSet(t *testing.T) {
	c := ownServer(t)
	ctx := testCtx(t)
	if r, err := c.SetRetention(ctx, 30); err != nil || r.Days != 30 {
		t.Fatalf("SetRetention = %+v, %v", r, err)
	}
	if r, err := c.Retention(ctx); err != nil || r.Days != 30 {
		t.Fatalf("Retention = %+v, %v", r, err)
	}
	chat := c.Chat("kept")
	seven := 7
	if r, err := chat.SetRetention(ctx, &seven); err != nil || r.Days != 7 || r.Inherited {
		t.Fatalf("chat SetRetention(7) = %+v, %v", r, err)
	}
	if r, err := chat.SetRetention(ctx, nil); err != nil || r.Days != 30 || !r.Inherited {
		t.Fatalf("chat SetRetention(nil) = %+v, %v, want the tenant's 30", r, err)
	}
	if _, err := c.SetRetention(ctx, -1); asAPIError(t, err).Status != http.StatusBadRequest {
		t.Fatalf("SetRetention(-1) = %v, want 400", err)
	}
}

// ownServer is a client of a local server of the test's own, for tests
// that see all of the tenant's chats or settings.
func ownServer(t *testing.T) *client.Client {
	t.Helper()
	srv, err := startServer(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
