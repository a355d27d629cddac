package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/api/openapitest"
	"github.com/durachat/durachat/shared/config"
)

// The other direction (a route the document lacks) fails every test that
// calls it through start's checking proxy. The Protected Resource
// Metadata is served only where the API takes JWTs, which the local
// server does not: there it is the 404 the document describes.
func TestEveryOperationOfTheOpenAPIDocumentIsServed(t *testing.T) {
	v, err := openapitest.New()
	if err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, map[string]string{config.EnvAddr: "127.0.0.1:0", config.EnvData: t.TempDir()})
	fill := strings.NewReplacer("{chat}", "c", "{name}", "0000000000000000", "{id}", "000000000000000000000000", "{key}", "k", "{file}", "index.html")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ops := v.Operations()
	if len(ops) < 25 {
		t.Fatalf("%d operations in the document", len(ops))
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		req, err := http.NewRequest(method, base+fill.Replace(path), strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		res.Body.Close()
		if strings.HasPrefix(path, api.ResourceMetadataPath) {
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("%s: answered %d, want 404: the local server takes no JWTs", op, res.StatusCode)
			}
			continue
		}
		if res.StatusCode == http.StatusMethodNotAllowed || strings.HasPrefix(e.Error.Message, "no route for") {
			t.Errorf("%s: answered %d %s: the server has no such route", op, res.StatusCode, e.Error.Message)
		}
	}
}
