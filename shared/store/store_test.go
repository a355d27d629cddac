package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

func TestIsOutage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", store.Unavailable("get", errors.New("connection refused")), true},
		{"wrapped unavailable", fmt.Errorf("read state: %w", store.Unavailable("get", errors.New("throttled"))), true},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		{"canceled", context.Canceled, true},
		{"not found", store.ErrNotFound, false},
		{"condition failed", store.ErrConditionFailed, false},
		{"too large", store.ErrTooLarge, false},
		{"other", errors.New("AccessDenied"), false},
	}
	for _, tt := range tests {
		if got := store.IsOutage(tt.err); got != tt.want {
			t.Errorf("%s: IsOutage(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestUploadKeyParsesBackToItsTenantAndName(t *testing.T) {
	for _, c := range []struct{ tenant, name string }{
		{"acme", "0123456789abcdef"},
		{"a/b c%", "fedcba9876543210"},
		{"ünï", "0000000000000000"},
	} {
		tenant, name, ok := store.ParseUploadKey(store.UploadKey(c.tenant, c.name))
		if !ok || tenant != c.tenant || name != c.name {
			t.Errorf("%q %q: parsed %q %q %v", c.tenant, c.name, tenant, name, ok)
		}
	}
	for _, key := range []string{"images/acme/0123456789abcdef", "uploads/", "uploads//x", "uploads/%zz/x", "uploads/acme"} {
		if _, _, ok := store.ParseUploadKey(key); ok {
			t.Errorf("%q parsed as an upload key", key)
		}
	}
}

func FuzzParseUploadKey(f *testing.F) {
	f.Add("acme", "0123456789abcdef")
	f.Add("a/b", "x")
	f.Fuzz(func(t *testing.T, tenant, name string) {
		if tenant == "" || strings.Contains(name, "/") {
			return
		}
		got, gotName, ok := store.ParseUploadKey(store.UploadKey(tenant, name))
		if !ok || got != tenant || gotName != name {
			t.Fatalf("%q %q: parsed %q %q %v", tenant, name, got, gotName, ok)
		}
	})
}

func TestATenantNameIsOneWellFormedPathSegmentOfEveryKey(t *testing.T) {
	tests := []struct {
		tenant string
		ok     bool
	}{
		{"acme", true},
		{"tenant B", true},
		{"auth0|5f7c8ec7c33c6c004bbafe82", true},
		{"a/b", true},
		{"%2e%2e", true},
		{".hidden", true},
		{"...", true},
		{"ü", true},
		{strings.Repeat("x", store.MaxTenant), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a\x00b", false},
		{"line\nbreak", false},
		{"\xff", false},
		{strings.Repeat("x", store.MaxTenant+1), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.tenant), func(t *testing.T) {
			err := store.CheckTenant(tt.tenant)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckTenant = %v, want ok %v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			// Escaped, the tenant is one segment, and not a dot segment.
			for _, key := range []string{store.ImageKey(tt.tenant, "0123456789abcdef"), store.UploadKey(tt.tenant, "0123456789abcdef")} {
				segs := strings.Split(key, "/")
				if len(segs) != 3 || segs[1] == "" || segs[1] == "." || segs[1] == ".." {
					t.Fatalf("key %q does not keep the tenant one segment", key)
				}
			}
			if got, _, ok := store.ParseUploadKey(store.UploadKey(tt.tenant, "0123456789abcdef")); !ok || got != tt.tenant {
				t.Fatalf("ParseUploadKey gives %q %v", got, ok)
			}
		})
	}
}
