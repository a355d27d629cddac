package store_test

import (
	"context"
	"errors"
	"fmt"
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
