package lambdafn_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// gatewayRoute names the function API Gateway routes path to
// (template.yaml): the hooks and uploads to theirs, the rest to memory.
func gatewayRoute(path string) string {
	switch {
	case strings.HasSuffix(path, "/hooks/before-request"):
		return "restore"
	case strings.HasSuffix(path, "/hooks/after-tool"), strings.HasSuffix(path, "/hooks/offload-input"), strings.HasSuffix(path, "/uploads"):
		return "offload"
	}
	return "memory"
}

// Every operation of the OpenAPI document but those only the local server
// serves is served by the function API Gateway routes it to, and its
// answer (checked by send) is one the document describes.
func TestEveryOperationIsServedByItsFunction(t *testing.T) {
	fns := functions(t)
	fill := strings.NewReplacer("{chat}", "c", "{name}", "0000000000000000", "{id}", "000000000000000000000000")
	for _, op := range checked.Operations() {
		if slices.Contains(notServedHere, op) {
			continue
		}
		method, path, _ := strings.Cut(op, " ")
		resp := fns[gatewayRoute(path)].do(t, method, fill.Replace(path), "", []byte("{}"))
		var e struct {
			Error struct{ Message string }
		}
		_ = json.Unmarshal([]byte(resp.Body), &e)
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.HasPrefix(e.Error.Message, "no route for") {
			t.Errorf("%s: the %s function answered %d %s", op, gatewayRoute(path), resp.StatusCode, e.Error.Message)
		}
	}
}

// A chat id that is an encoded slash, as API Gateway passes the raw path
// on, is a 400 naming chat on every chat route of every function.
func TestAnEncodedSlashForAChatIsA400NamingItInEveryFunction(t *testing.T) {
	fns := functions(t)
	for _, op := range checked.Operations() {
		method, path, _ := strings.Cut(op, " ")
		if !strings.Contains(path, "{chat}") {
			continue
		}
		resp := fns[gatewayRoute(path)].do(t, method, strings.NewReplacer("{chat}", "%2F", "{name}", "0000000000000000", "{id}", "000000000000000000000000").Replace(path), "", []byte("{}"))
		var e struct{ Error struct{ Field string } }
		_ = json.Unmarshal([]byte(resp.Body), &e)
		if resp.StatusCode != http.StatusBadRequest || (method != http.MethodHead && e.Error.Field != "chat") {
			t.Errorf("%s with chat %%2F: %d %.200s, want 400 naming chat", op, resp.StatusCode, resp.Body)
		}
	}
}
