package anthropic

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/anthropic/anthropictest"
)

// view renders a compaction view with n lines between its tags.
func view(n int) string {
	var b strings.Builder
	b.WriteString("<chat>\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d+1|line %d\n", i, i)
	}
	b.WriteString("</chat>")
	return b.String()
}

func request(prefix string, parts ...model.Part) model.Request {
	all := append([]model.Part{{Text: prefix, Prefix: true}, {Text: "the task"}}, parts...)
	return model.Request{System: "sys", MaxTokens: 300, Messages: []model.Message{{Role: "user", Parts: all}}}
}

func ok(text string) func(int, anthropictest.Request) anthropictest.Reply {
	return func(int, anthropictest.Request) anthropictest.Reply { return anthropictest.Reply{Text: text} }
}

func TestPrefixIsCutIntoFourLineBlocksMarkedAtTheLastWholeBlockAnd20And40Before(t *testing.T) {
	tests := []struct {
		name      string
		viewLines int
		marked    []int // indexes of the prefix blocks carrying cache_control
	}{
		// "<chat>" + 199 lines + "</chat>": 50 whole blocks, then "</chat>".
		{"three marks", 199, []int{9, 29, 49}},
		// "<chat>" + 99 lines: 25 whole blocks (0..24) and "</chat>".
		{"two marks", 99, []int{4, 24}},
		// "<chat>" + 2 lines + "</chat>": no whole block, nothing marked.
		{"short view", 2, nil},
		// "<chat>" + 5 lines + "</chat>": block 0 whole, block 1 ends the view.
		{"one mark", 5, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := anthropictest.New(t, ok("a line"))
			m := New(srv.Client(), "claude-test", Options{})
			prefix := view(tt.viewLines)
			if _, err := m.Complete(context.Background(), request(prefix)); err != nil {
				t.Fatal(err)
			}
			req := srv.Requests()[0]
			content := req.Messages[0].Content
			task := content[len(content)-1]
			if task.Text != "the task" || task.CacheControl != nil {
				t.Fatalf("last block = %+v, want the unmarked task", task)
			}
			blocks := content[:len(content)-1]
			var joined strings.Builder
			var marked []int
			for i, b := range blocks {
				joined.WriteString(b.Text)
				if strings.Count(b.Text, "\n") > BlockLines {
					t.Errorf("block %d has more than %d lines: %q", i, BlockLines, b.Text)
				}
				if b.CacheControl != nil {
					if b.CacheControl.Type != "ephemeral" {
						t.Errorf("block %d cache_control type %q", i, b.CacheControl.Type)
					}
					marked = append(marked, i)
				}
			}
			if joined.String() != prefix {
				t.Fatalf("blocks do not join back to the prefix")
			}
			if fmt.Sprint(marked) != fmt.Sprint(tt.marked) {
				t.Fatalf("marked blocks %v, want %v", marked, tt.marked)
			}
			if len(marked) > maxMarks {
				t.Fatalf("%d marks, over the API's %d", len(marked), maxMarks)
			}
			if len(req.System) != 1 || req.System[0].Text != "sys" || req.MaxTokens != 300 || !req.Stream {
				t.Fatalf("system/max_tokens/stream wrong: %+v", req)
			}
		})
	}
}

func TestImagesAreSentAsBase64BlocksInOrder(t *testing.T) {
	srv := anthropictest.New(t, ok("a line"))
	m := New(srv.Client(), "claude-test", Options{})
	img := &model.Image{Name: "0123456789abcdef", MimeType: "image/png", Data: []byte("png-bytes")}
	_, err := m.Complete(context.Background(), request(view(8), model.Part{Text: "[image 0123456789abcdef]"}, model.Part{Image: img}))
	if err != nil {
		t.Fatal(err)
	}
	content := srv.Requests()[0].Messages[0].Content
	label, image := content[len(content)-2], content[len(content)-1]
	if label.Text != "[image 0123456789abcdef]" {
		t.Fatalf("label = %+v", label)
	}
	if image.Type != "image" || image.Source == nil || image.Source.Type != "base64" ||
		image.Source.MediaType != "image/png" || image.Source.Data != base64.StdEncoding.EncodeToString(img.Data) {
		t.Fatalf("image block = %+v", image)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	tests := []struct {
		name      string
		reply     anthropictest.Reply
		retryable bool
		refused   bool
	}{
		{"429 rate limited", anthropictest.Reply{Status: 429, ErrorType: "rate_limit_error"}, true, false},
		{"529 overloaded", anthropictest.Reply{Status: 529, ErrorType: "overloaded_error"}, true, false},
		{"500 server error", anthropictest.Reply{Status: 500, ErrorType: "api_error"}, true, false},
		{"503 unavailable", anthropictest.Reply{Status: 503}, true, false},
		{"400 image rejected", anthropictest.Reply{Status: 400, ErrorType: "invalid_request_error"}, false, false},
		{"401 bad key", anthropictest.Reply{Status: 401, ErrorType: "authentication_error"}, false, false},
		{"403 forbidden", anthropictest.Reply{Status: 403, ErrorType: "permission_error"}, false, false},
		{"dropped connection", anthropictest.Reply{Drop: true}, true, false},
		{"overloaded mid-stream", anthropictest.Reply{StreamError: "overloaded_error"}, true, false},
		{"refusal", anthropictest.Reply{Text: "", StopReason: "refusal"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply { return tt.reply })
			m := New(srv.Client(), "claude-test", Options{})
			_, err := m.Complete(context.Background(), request(view(3)))
			if err == nil {
				t.Fatal("no error")
			}
			if got := model.IsRetryable(err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v (%v)", got, tt.retryable, err)
			}
			if got := model.IsRefused(err); got != tt.refused {
				t.Errorf("IsRefused = %v, want %v (%v)", got, tt.refused, err)
			}
		})
	}
}

func TestUsageIncludesCacheTokens(t *testing.T) {
	srv := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Text: "x", CacheRead: 70, CacheWrite: 30}
	})
	resp, err := New(srv.Client(), "claude-test", Options{}).Complete(context.Background(), request(view(3)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "x" || resp.Usage.CacheReadTokens != 70 || resp.Usage.CacheWriteTokens != 30 || resp.Usage.InputTokens != 100 {
		t.Fatalf("response = %+v", resp)
	}
}

// waitFor polls cond; it bounds a wait for another goroutine, it does not
// time anything.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPrimeFirstHoldsCallsWithTheSamePrefixUntilTheFirstAnswers(t *testing.T) {
	hold := make(chan struct{})
	srv := anthropictest.New(t, func(n int, _ anthropictest.Request) anthropictest.Reply {
		if n == 0 {
			<-hold
		}
		return anthropictest.Reply{Text: "line"}
	})
	m := New(srv.Client(), "claude-test", Options{})
	prefix := view(40)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	call := func(prefix string) {
		defer wg.Done()
		_, err := m.Complete(context.Background(), request(prefix))
		errs <- err
	}
	wg.Add(1)
	go call(prefix)
	waitFor(t, "the first call to reach the server", func() bool { return len(srv.Requests()) == 1 })

	wg.Add(2)
	go call(prefix)
	go call(prefix)
	waitFor(t, "two calls waiting on the primer", func() bool { return m.primer.waiters() == 2 })
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests reached the server while the prefix was priming, want 1", n)
	}

	// A different prefix is not held.
	wg.Add(1)
	go call(view(44))
	waitFor(t, "the other prefix's call", func() bool { return len(srv.Requests()) == 2 })

	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	// Once primed, a call goes straight through.
	if _, err := m.Complete(context.Background(), request(prefix)); err != nil {
		t.Fatal(err)
	}
}

func TestPrimeFirstHandsOverWhenTheFirstCallFails(t *testing.T) {
	hold := make(chan struct{})
	srv := anthropictest.New(t, func(n int, _ anthropictest.Request) anthropictest.Reply {
		if n == 0 {
			<-hold
			return anthropictest.Reply{Status: 500}
		}
		return anthropictest.Reply{Text: "line"}
	})
	m := New(srv.Client(), "claude-test", Options{})
	prefix := view(40)
	first := make(chan error, 1)
	go func() {
		_, err := m.Complete(context.Background(), request(prefix))
		first <- err
	}()
	waitFor(t, "the first call", func() bool { return len(srv.Requests()) == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := m.Complete(context.Background(), request(prefix))
		second <- err
	}()
	waitFor(t, "the second call to wait", func() bool { return m.primer.waiters() == 1 })
	close(hold)
	if err := <-first; !model.IsRetryable(err) {
		t.Fatalf("first call: %v, want a retryable error", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second call, which primes in turn: %v", err)
	}
}

func TestPrimeFirstWaitIsBounded(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	srv := anthropictest.New(t, func(n int, _ anthropictest.Request) anthropictest.Reply {
		if n == 0 {
			<-hold
		}
		return anthropictest.Reply{Text: "line"}
	})
	m := New(srv.Client(), "claude-test", Options{PrimeWait: time.Millisecond})
	prefix := view(40)
	go m.Complete(context.Background(), request(prefix))
	waitFor(t, "the first call", func() bool { return len(srv.Requests()) == 1 })
	if _, err := m.Complete(context.Background(), request(prefix)); err != nil {
		t.Fatalf("a call past the wait goes ahead: %v", err)
	}
}

func TestPrimerForgetsPrimedPrefixesBeyondItsBound(t *testing.T) {
	now := time.Unix(0, 0)
	p := newPrimer(2, time.Minute, time.Second, func() time.Time { now = now.Add(time.Second); return now })
	for _, k := range []string{"a", "b", "c"} {
		release, err := p.acquire(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		release(true)
	}
	if len(p.entries) != 2 || p.entries["a"] != nil {
		t.Fatalf("entries = %v, want b and c", p.entries)
	}
	// An expired prefix is primed again.
	now = now.Add(time.Hour)
	release, _ := p.acquire(context.Background(), "c")
	if p.entries["c"].primed {
		t.Fatal("an expired prefix counts as cached")
	}
	release(true)
}
