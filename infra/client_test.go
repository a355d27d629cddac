package infra

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const clientModule = "github.com/durachat/durachat/client"

// TestTheClientModuleNeedsOnlyTheStandardLibrary: `go get` of the Go
// client brings the client alone, not the server's AWS SDK, browser
// driver and test servers.
func TestTheClientModuleNeedsOnlyTheStandardLibrary(t *testing.T) {
	mods := goInClient(t, "list", "-m", "all")
	if got := strings.Fields(mods); len(got) != 1 || got[0] != clientModule {
		t.Errorf("the client's module graph is %q, want %s alone", got, clientModule)
	}
	pkgs := goInClient(t, "list", "-deps", "-test", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(pkgs), "\n") {
		p, _, _ := strings.Cut(line, " ") // "p [p.test]" is p as its tests build it
		p = strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test")
		if p != clientModule && !strings.HasPrefix(p, clientModule+"/") {
			t.Errorf("the client's module links %s", p)
		}
	}
}

// TestTheClientsGoLineIsOneAUsersToolchainAccepts: a toolchain two
// releases older than the server's (the Go team supports the last two)
// builds the client without fetching another, so its go line is at most
// that, and it names no toolchain.
func TestTheClientsGoLineIsOneAUsersToolchainAccepts(t *testing.T) {
	server, client := readGoMod(t, "../go.mod"), readGoMod(t, "../client/go.mod")
	if client["module"] != clientModule {
		t.Fatalf("client/go.mod declares %q, want %s", client["module"], clientModule)
	}
	if tc, ok := client["toolchain"]; ok {
		t.Errorf("client/go.mod names the toolchain %s: a user's go would fetch it", tc)
	}
	if s, c := goMinor(t, server["go"]), goMinor(t, client["go"]); c > s-2 {
		t.Errorf("client/go.mod says go %s, the server go %s: a client's go line is at most 1.%d", client["go"], server["go"], s-2)
	}
	if r := server["replace "+clientModule]; r != "./client" {
		t.Errorf("the server's go.mod replaces the client with %q, want ./client: it would build a published version instead", r)
	}
}

func goInClient(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../client"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in client/: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// readGoMod reads a go.mod's one-line directives: "module", "go",
// "toolchain", and "replace <path>" (to what it is replaced with).
func readGoMod(t *testing.T, name string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && (f[0] == "module" || f[0] == "go" || f[0] == "toolchain"):
			d[f[0]] = f[1]
		case len(f) == 4 && f[0] == "replace" && f[2] == "=>":
			d["replace "+f[1]] = f[3]
		}
	}
	if d["module"] == "" || d["go"] == "" {
		t.Fatalf("%s has no module or go line", name)
	}
	return d
}

// goMinor is the minor release of a go line ("1.26.8" is 26).
func goMinor(t *testing.T, v string) int {
	t.Helper()
	parts := strings.Split(v, ".")
	if len(parts) < 2 || parts[0] != "1" {
		t.Fatalf("go line %q is not 1.N", v)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatalf("go line %q: %v", v, err)
	}
	return n
}
