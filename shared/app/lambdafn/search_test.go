package lambdafn_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The search attack through the memory function: an entry of 5 MB of "a"
// (as much as one Lambda request carries) and a quoted phrase of 20,000 "a"
// and a "b", which made a search compare 20,000 characters at every
// position.
func TestSearchOfALongQueryInALongEntryAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("5 MB entries: not in -short")
	}
	mem := functions(t)["memory"]
	if status, out, _ := mem.call(t, "/v1/chats/c/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": strings.Repeat("a", 5_000_000)}}})); status != http.StatusOK {
		t.Fatalf("append: %d %.300s", status, out)
	}
	if resp := mem.do(t, "PUT", "/v1/chats/c/memory/settings", "", []byte(`{"search":true}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("search on: %d %s", resp.StatusCode, resp.Body)
	}
	for _, c := range []struct {
		query string
		hit   bool
	}{
		{`"` + strings.Repeat("a", 20_000) + "b" + `"`, false},
		{`"` + strings.Repeat("A", 20_000) + `"`, true},
	} {
		status, out, _ := mem.call(t, "/v1/chats/c/tools/search", mustJSON(t, obj{"text": c.query}))
		var res struct {
			Content []struct{ Text string }
			IsError bool
		}
		if status != http.StatusOK || json.Unmarshal(out, &res) != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("search: %d %.300s", status, out)
		}
		if got := strings.Contains(res.Content[0].Text, " entries match "); got != c.hit {
			t.Fatalf("search for %d characters: %.200s, want a hit %v", len(c.query), res.Content[0].Text, c.hit)
		}
	}
}

// A chat's settings written before its first append belong to the chat
// that append then logs into: the append opens no new chat that has lost
// them. Once the chat is deleted, its id names a chat with none.
func TestSettingsBeforeTheFirstAppendAreTheChats(t *testing.T) {
	mem := functions(t)["memory"]
	searchFinds := func(t *testing.T, chat string) bool {
		t.Helper()
		status, out, _ := mem.call(t, "/v1/chats/"+chat+"/tools/search", mustJSON(t, obj{"text": "zebra"}))
		var res struct {
			Content []struct{ Text string }
			IsError bool
		}
		// A search that is off is a 404 tool error the model can read.
		if (status != http.StatusOK && status != http.StatusNotFound) || json.Unmarshal(out, &res) != nil || len(res.Content) == 0 {
			t.Fatalf("search: %d %.300s", status, out)
		}
		return status == http.StatusOK && !res.IsError && strings.Contains(res.Content[0].Text, "zebra")
	}
	if resp := mem.do(t, "PUT", "/v1/chats/early/memory/settings", "", []byte(`{"search":true}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("search on: %d %s", resp.StatusCode, resp.Body)
	}
	if status, out, _ := mem.call(t, "/v1/chats/early/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": "the zebra crossing"}}})); status != http.StatusOK {
		t.Fatalf("append: %d %.300s", status, out)
	}
	if !searchFinds(t, "early") {
		t.Fatal("search after settings then append: off or no hit, want the entry")
	}
	if resp := mem.do(t, "DELETE", "/v1/chats/early", "", nil); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %d %s", resp.StatusCode, resp.Body)
	}
	if status, out, _ := mem.call(t, "/v1/chats/early/messages", mustJSON(t, obj{"messages": list{obj{"role": "user", "content": "the zebra again"}}})); status != http.StatusOK {
		t.Fatalf("append after delete: %d %.300s", status, out)
	}
	if searchFinds(t, "early") {
		t.Fatal("search in the id's new chat: on, want the deleted chat's setting gone with it")
	}
}
