package testenv

import (
	"os/exec"
	"testing"
)

// Serve gives the server port 0 and returns the URL the server announces
// for the port it was given.
func TestServeReturnsTheURLTheServerAnnounces(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo "starting"; echo "durachat serving on http://$DURACHAT_ADDR"; exec sleep 60`)
	if got, want := Serve(t, cmd), "http://127.0.0.1:0"; got != want {
		t.Fatalf("URL %q, want %q: the address the server was given, as it announced it", got, want)
	}
}
