package hooks

import (
	"os"
	"strings"
	"testing"
)

// TestHookOrderIsDocumented: a host must know when to call each hook, so
// docs/hooks.md states the order, each hook with the moment it is called.
func TestHookOrderIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/hooks.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## The order a host calls them")
	if start < 0 {
		t.Fatal("docs/hooks.md has no section on the order of the hooks")
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, want := range []string{
		"**offload-input** on a user's input *before it submits it*",
		"**before-request** *after the host has selected the messages of the request*",
		"**after-tool** on each tool result *before the host keeps it*",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the order section does not say %q", want)
		}
	}
	for _, route := range []string{"/hooks/after-tool", "/hooks/offload-input", "/hooks/before-request", "/images/{name}"} {
		if !strings.Contains(text, route) {
			t.Errorf("docs/hooks.md does not name %s", route)
		}
	}
}
