package hooks

import (
	"os/exec"
	"strings"
	"testing"
)

// The hooks, and the image store they use, know nothing of the model
// package: a stored image is an images.Image.
func TestHooksDoNotImportModel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/durachat/durachat/shared/model" || strings.HasPrefix(p, "github.com/durachat/durachat/shared/model/") {
			t.Fatalf("hooks depend on %s", p)
		}
	}
}
