package infra

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// coldStartEnv is what each function's configuration needs to start.
var coldStartEnv = []string{
	"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
	"AWS_EC2_METADATA_DISABLED=true",
	"DURACHAT_BUCKET=b", "DURACHAT_TABLE=t", "DURACHAT_QUEUE_URL=http://127.0.0.1:1/q",
	"DURACHAT_MODEL=offline",
}

// BenchmarkColdStart measures each function's init: from exec of its
// bootstrap (built as sam build builds it, for this host) to its first call
// to the Lambda runtime API (the next-invocation poll), against a
// runtime API that records the call and never answers. Each iteration is
// one cold start; "ms-median" is the median, "MB-arm64" the size of the
// arm64 bootstrap. "baseline" is a function that links the runtime client
// only. Run with -benchtime=10x (docs/performance.md).
func BenchmarkColdStart(b *testing.B) {
	for _, fn := range []struct{ name, pkg string }{
		{"baseline", "./infra/testdata/coldstart"},
		{"restore", "./functions/restore"},
		{"offload", "./functions/offload"},
		{"memory", "./functions/memory"},
		{"compact", "./functions/compact"},
	} {
		b.Run(fn.name, func(b *testing.B) {
			dir := b.TempDir()
			host := filepath.Join(dir, "bootstrap")
			arm := filepath.Join(dir, "bootstrap-arm64")
			for _, out := range []struct{ path, arch string }{{host, ""}, {arm, "arm64"}} {
				cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", out.path, fn.pkg)
				cmd.Dir = ".."
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
				if out.arch != "" {
					cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+out.arch)
				}
				if msg, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("building %s: %v\n%s", fn.pkg, err, msg)
				}
			}
			st, err := os.Stat(arm)
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			polled := make(chan time.Time, 1)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case polled <- time.Now():
				default:
				}
				<-r.Context().Done()
			})}
			go srv.Serve(ln)
			defer srv.Close()
			var times []time.Duration
			for b.Loop() {
				cmd := exec.Command(host)
				cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(), "HOME=" + dir}, coldStartEnv...)
				start := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				select {
				case at := <-polled:
					times = append(times, at.Sub(start))
				case <-time.After(10 * time.Second):
					b.Fatalf("%s never called the runtime API", fn.name)
				}
				cmd.Process.Kill()
				cmd.Wait()
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(st.Size())/1e6, "MB-arm64")
		})
	}
}
