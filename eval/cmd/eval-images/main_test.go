package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/model/anthropic/anthropictest"
)

func TestWithoutAUsableModelItExitsWithWhatToSet(t *testing.T) {
	tests := []struct {
		name, model, key string
		want             string
	}{
		{"no model", "", "", "no model configured"},
		{"offline", "offline", "", "cannot read images"},
		{"anthropic without a key", "anthropic:claude-sonnet-4-5", "", "ANTHROPIC_API_KEY is not set"},
		{"unknown provider", "acme:vision", "", "unknown provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envModel, tt.model)
			t.Setenv(envModelURL, "")
			t.Setenv("ANTHROPIC_API_KEY", tt.key)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), nil, &stdout, &stderr)
			if !errors.Is(err, errSetup) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a setup error saying %q", err, tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed a report without a model: %s", stdout.String())
			}
		})
	}
}

func TestARejectedKeyStopsAtTheFirstCall(t *testing.T) {
	srv := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Status: 401, ErrorType: "authentication_error"}
	})
	t.Setenv(envModel, "anthropic:claude-test")
	t.Setenv(envModelURL, srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "wrong")
	err := run(context.Background(), nil, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, errSetup) || !strings.Contains(err.Error(), "first call") {
		t.Fatalf("err = %v, want the first call's failure", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d calls after a rejected key, want 1", n)
	}
}

// A model that sees nothing still gets both arms built and both tables
// printed: the command's plumbing, without a real model.
func TestBothArmsRunAndTheReportIsPrintedAndWritten(t *testing.T) {
	srv := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Text: "a short line"}
	})
	t.Setenv(envModel, "anthropic:claude-sonnet-4-5")
	t.Setenv(envModelURL, srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	out := filepath.Join(t.TempDir(), "report.md")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-out", out, "-workers", "8"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	report := stdout.String()
	t.Logf("report:\n%s", report)
	for _, want := range []string{
		"| Before: no images attached | 0% (0/18) |",
		"| After: images attached | 0% (0/18) |",
		"Per image (18 attached)",
		"Prices used",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	written, err := os.ReadFile(out)
	if err != nil || string(written) != report {
		t.Errorf("-out wrote %q, %v; want the printed report", written, err)
	}
}
