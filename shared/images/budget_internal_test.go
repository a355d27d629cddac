package images

import (
	"errors"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/store"
)

func TestDecodeWaitsABoundedTimeForBudgetThenIsBusy(t *testing.T) {
	b := NewBudget(100)
	b.Wait = 50 * time.Millisecond
	release, err := b.acquire(t.Context(), 80)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(t.Context(), 30); !errors.Is(err, ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("acquire past a held budget: error = %v, want ErrBusy, an outage", err)
	}
	// Once the holder gives its bytes back, a waiting decode goes ahead.
	done := make(chan error, 1)
	b.Wait = 5 * time.Second
	go func() {
		r, err := b.acquire(t.Context(), 30)
		if err == nil {
			r()
		}
		done <- err
	}()
	release()
	release() // giving back twice gives back once
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(t.Context(), 101); !errors.Is(err, ErrTooLarge) {
		t.Errorf("acquire past the whole budget: error = %v, want ErrTooLarge", err)
	}
}

func TestLambdaBudgetIsAQuarterOfTheFunctionMemory(t *testing.T) {
	tests := []struct {
		env  string
		want int64
	}{
		{"", DefaultDecodeBudget},
		{"not a number", DefaultDecodeBudget},
		{"256", 64 << 20},
		{"512", 128 << 20},
		{"10240", DefaultDecodeBudget},
	}
	for _, tt := range tests {
		if got := defaultBudgetSize(tt.env); got != tt.want {
			t.Errorf("defaultBudgetSize(%q) = %d, want %d", tt.env, got, tt.want)
		}
	}
}
