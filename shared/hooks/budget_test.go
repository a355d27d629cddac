package hooks

import "testing"

// TestTheInlineBudgetClosesAtTheFirstImageThatDoesNotFit: images are
// offered newest first; once one does not fit (too large, or past the
// number of images), no older one goes inline, however small.
func TestTheInlineBudgetClosesAtTheFirstImageThatDoesNotFit(t *testing.T) {
	for _, c := range []struct {
		name   string
		bytes  int64
		images int
		sizes  []int64
		want   []bool
	}{
		{"all fit", 10, 0, []int64{4, 4}, []bool{true, true}},
		{"a large one closes it for the smaller ones after", 10, 0, []int64{4, 8, 1}, []bool{true, false, false}},
		{"the number of images closes it", 100, 2, []int64{1, 1, 1}, []bool{true, true, false}},
	} {
		b := NewInlineBudget(c.bytes, c.images)
		for i, size := range c.sizes {
			if got := b.Take(size); got != c.want[i] {
				t.Errorf("%s: image %d of %d bytes: took %v, want %v", c.name, i, size, got, c.want[i])
			}
		}
	}
	b := NewInlineBudget(10, 0)
	b.Close()
	if b.Take(1) {
		t.Error("a closed budget took an image")
	}
}
