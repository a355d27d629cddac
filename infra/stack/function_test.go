package stack

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// fakeEmulatorEnv makes the test binary a stand-in for aws-lambda-rie: it
// exits at once while its marker file is missing (as an emulator whose
// port was taken does), and creates the file; then it serves its invoke
// address until killed.
const fakeEmulatorEnv = "DURACHAT_FAKE_EMULATOR_MARKER"

func TestMain(m *testing.M) {
	if marker := os.Getenv(fakeEmulatorEnv); marker != "" {
		fakeEmulator(marker)
		return
	}
	if arg := os.Getenv(takePortEnv); arg != "" {
		takePort(arg)
	}
	os.Exit(m.Run())
}

func fakeEmulator(marker string) {
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		os.WriteFile(marker, nil, 0o644)
		os.Exit(1)
	}
	var addr string
	for i, a := range os.Args {
		if a == "--runtime-interface-emulator-address" && i+1 < len(os.Args) {
			addr = os.Args[i+1]
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(2)
	}
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"statusCode":200,"body":"ok"}`)
	}))
}

// An emulator that exits before it listens is started again, on other
// ports, and its ports are handed out again once it has ended.
func TestAnEmulatorThatExitsBeforeListeningIsStartedAgain(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started-once")
	f := &Function{Def: FunctionDef{Name: "F", Timeout: 3}, RIE: os.Args[0], Bootstrap: filepath.Join(t.TempDir(), "bootstrap"),
		Env: []string{fakeEmulatorEnv + "=" + marker}, Logs: io.Discard, Ports: NewPorts(20000, 32768)}
	defer f.Close()
	out, err := f.Invoke(t.Context(), []byte(`{}`))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if string(out) != `{"statusCode":200,"body":"ok"}` {
		t.Fatalf("answer %s", out)
	}
	if n := f.ColdStarts(); n != 2 {
		t.Fatalf("%d emulators started, want 2: the one that exited, then its replacement", n)
	}
	f.Ports.mu.Lock()
	held := len(f.Ports.held)
	f.Ports.mu.Unlock()
	if held != 2 {
		t.Fatalf("%d ports held, want the live emulator's 2", held)
	}
}
