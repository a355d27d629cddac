package imagefacts

import (
	"context"
	"sync"

	"github.com/durachat/durachat/shared/model"
)

// TextOnly is a model that says it takes no images: the compactor then
// attaches none and keeps a short message word for word, which is how
// leaves were built before image-aware summaries. Calls go to the model
// unchanged.
type TextOnly struct{ model.Model }

// Capabilities: no image input.
func (TextOnly) Capabilities() model.Capabilities { return model.Capabilities{} }

// Usage sums the calls of one arm.
type Usage struct {
	Calls int
	// ImageCalls carried at least one image; Images counts the image
	// parts sent over all calls (a retry in the same conversation sends
	// its images again).
	ImageCalls int
	Images     int
	Tokens     model.Usage
	// ImageTokens is the usage of the calls that carried images.
	ImageTokens model.Usage
	Failed      int
}

// Meter counts the calls and tokens that go through a model.
type Meter struct {
	model.Model

	mu    sync.Mutex
	usage Usage
}

// NewMeter wraps m.
func NewMeter(m model.Model) *Meter { return &Meter{Model: m} }

// Complete calls the model and counts the call.
func (m *Meter) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	images := 0
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			if p.Image != nil {
				images++
			}
		}
	}
	resp, err := m.Model.Complete(ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.Calls++
	if err != nil {
		m.usage.Failed++
		return resp, err
	}
	addUsage(&m.usage.Tokens, resp.Usage)
	if images > 0 {
		m.usage.ImageCalls++
		m.usage.Images += images
		addUsage(&m.usage.ImageTokens, resp.Usage)
	}
	return resp, err
}

// Usage returns the counts so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage
}

func addUsage(sum *model.Usage, u model.Usage) {
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.CacheReadTokens += u.CacheReadTokens
	sum.CacheWriteTokens += u.CacheWriteTokens
}
