package hooks

import "math"

// InlineBudget is what images sent inline may still take: bytes of base64
// and a number of images. It is spent newest first and closes at the first
// image that does not fit: every older image then goes another way (a
// link, a ref left as text), so what is inline depends only on the images,
// and no older, smaller image takes the place of a newer one the model has
// just asked for. before-request spends one over a request's refs; the MCP
// server over a memory tool's images.
type InlineBudget struct {
	bytes  int64
	images int
	closed bool
}

// NewInlineBudget is a budget of bytes of base64 and at most images
// images (0 or less: no bound on their number).
func NewInlineBudget(bytes int64, images int) *InlineBudget {
	if images <= 0 {
		images = math.MaxInt
	}
	return &InlineBudget{bytes: bytes, images: images}
}

// Left is the bytes of base64 the budget still holds.
func (b *InlineBudget) Left() int64 { return b.bytes }

// Take spends an image of size bytes of base64 when it fits, and reports
// whether it did; one that does not fit closes the budget.
func (b *InlineBudget) Take(size int64) bool {
	if b.closed || size > b.bytes || b.images == 0 {
		b.closed = true
		return false
	}
	b.bytes -= size
	b.images--
	return true
}

// Close closes the budget: an image that goes another way for a cause of
// its own (too large for the answer, say) is as one that did not fit.
func (b *InlineBudget) Close() { b.closed = true }
