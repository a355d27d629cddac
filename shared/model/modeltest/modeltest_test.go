package modeltest

import (
	"slices"
	"testing"
)

func TestARecorderKeepsEveryRequestUnlessToldToKeepTheLatest(t *testing.T) {
	var r Recorder[int]
	for i := range 5 {
		if n := r.Record(i); n != i {
			t.Fatalf("request %d: %d came before it", i, n)
		}
	}
	if got := r.Requests(); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("kept %v", got)
	}
	r.Keep(2)
	if got := r.Requests(); !slices.Equal(got, []int{3, 4}) {
		t.Fatalf("after Keep(2) kept %v, want the latest 2", got)
	}
	for i := 5; i < 100; i++ {
		if n := r.Record(i); n != i {
			t.Fatalf("request %d: %d came before it", i, n)
		}
	}
	if got, n := r.Requests(), r.Count(); !slices.Equal(got, []int{98, 99}) || n != 100 {
		t.Fatalf("kept %v of %d, want [98 99] of 100", got, n)
	}
}
