package infra

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedFile bounds every file in the repository: each clone, each
// fetch of a module and each `sam build` (which copies the tree once per
// function) carries them all.
const maxTrackedFile = 2 << 20

// trackedFiles lists the repository's tracked files, relative to its root.
// Outside a git checkout (an unpacked module archive) there is no list to
// check, and the test says so.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: no list of tracked files")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		if _, statErr := os.Stat("../.git"); os.IsNotExist(statErr) {
			t.Skip("not a git checkout: no list of tracked files")
		}
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	if len(files) == 0 {
		t.Fatal("git ls-files lists no file")
	}
	return files
}

// TestNoTrackedFileIsOver2MB: a build output or a data dump committed by
// mistake fails here, not in every clone.
func TestNoTrackedFileIsOver2MB(t *testing.T) {
	for _, f := range trackedFiles(t) {
		fi, err := os.Lstat(filepath.Join("..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxTrackedFile {
			t.Errorf("%s is %d bytes, over the %d a tracked file may have", f, fi.Size(), maxTrackedFile)
		}
	}
}

// TestRootBuildOutputsAreIgnored: `go build ./cmd/X` (and every other
// main package) run at the root writes a binary named after its directory
// there, as `go test -c` writes X.test and a Lambda build writes
// bootstrap; none of them can be added by a `git add .`.
func TestRootBuildOutputsAreIgnored(t *testing.T) {
	trackedFiles(t) // skips outside a git checkout
	cmd := exec.Command("go", "list", "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	outputs := []string{"bootstrap", "client.test", "durachat.test", "cpu.out"}
	for _, pkg := range strings.Fields(string(out)) {
		outputs = append(outputs, path.Base(pkg))
	}
	if len(outputs) < 6 {
		t.Fatalf("go list found %d main packages, expected the CLI, the stack and the four functions at least", len(outputs)-4)
	}
	for _, name := range outputs {
		check := exec.Command("git", "check-ignore", "--no-index", "-q", name)
		check.Dir = ".."
		if err := check.Run(); err != nil {
			t.Errorf("%s at the repository's root is not ignored (add it to .gitignore): %v", name, err)
		}
	}
}

// TestEveryPackageIsApacheLicensed: each distributable part carries the
// same license file as the repository (a Go module's archive and an npm
// package hold only their own directory), and every package.json and its
// lock name it.
func TestEveryPackageIsApacheLicensed(t *testing.T) {
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(license, []byte("Apache License\n                           Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
	for _, dir := range []string{"client", "clients/pi", "clients/ts"} {
		got, err := os.ReadFile(filepath.Join("..", dir, "LICENSE"))
		if err != nil {
			t.Errorf("%s has no LICENSE of its own: %v", dir, err)
			continue
		}
		if !bytes.Equal(got, license) {
			t.Errorf("%s/LICENSE differs from the repository's LICENSE", dir)
		}
	}
	var manifests []string
	for _, f := range trackedFiles(t) {
		if path.Base(f) == "package.json" {
			manifests = append(manifests, f)
		}
	}
	if len(manifests) < 3 {
		t.Fatalf("found %d package.json files, expected the pi extension's and the two local servers'", len(manifests))
	}
	for _, f := range manifests {
		var pkg struct {
			License string `json:"license"`
		}
		readJSON(t, filepath.Join("..", f), &pkg)
		if pkg.License != "Apache-2.0" {
			t.Errorf("%s: license is %q, not Apache-2.0", f, pkg.License)
		}
		var lock struct {
			Packages map[string]struct {
				License string `json:"license"`
			} `json:"packages"`
		}
		readJSON(t, filepath.Join("..", path.Dir(f), "package-lock.json"), &lock)
		if got := lock.Packages[""].License; got != pkg.License {
			t.Errorf("%s: the lock's license is %q, the package's %q", f, got, pkg.License)
		}
	}
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
