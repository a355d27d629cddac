package memory_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// seeingModel takes images and describes the ones attached to a call by
// their labels; with reject set it turns down every call carrying an
// image, as a provider rejecting the image would.
type seeingModel struct {
	mu     sync.Mutex
	reject bool
	calls  []model.Request
}

func (m *seeingModel) Name() string { return "seeing" }

func (m *seeingModel) Capabilities() model.Capabilities {
	return model.Capabilities{Images: true, MaxImages: 20}
}

func (m *seeingModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, req)
	var seen []string
	parts := req.Messages[0].Parts
	for k, p := range parts {
		if p.Image == nil {
			continue
		}
		if m.reject {
			return model.Response{}, model.StatusError(400, errors.New("the image could not be processed"))
		}
		seen = append(seen, "saw "+parts[k-1].Text)
	}
	if len(seen) == 0 {
		return model.Response{Text: "a line written without seeing an image"}, nil
	}
	return model.Response{Text: strings.Join(seen, "; ")}, nil
}

func (m *seeingModel) imageParts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, req := range m.calls {
		for _, p := range req.Messages[0].Parts {
			if p.Image != nil {
				n++
			}
		}
	}
	return n
}

func dotPNG(t *testing.T, c color.RGBA) string {
	img := image.NewRGBA(image.Rect(0, 0, 6, 6))
	img.Set(2, 2, c)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// realStores are one backend's stores under the real transcript and image
// store, with blob faults a test switches on and a clock it moves, for
// memories over the real compactor.
type realStores struct {
	t     *testing.T
	b     testenv.Backend
	blobs *testenv.FailingBlobs
	imgs  *images.Store
	log   *transcript.Log

	mu  sync.Mutex
	now time.Time
}

func newRealStores(t *testing.T, b testenv.Backend) *realStores {
	r := &realStores{t: t, b: b, blobs: &testenv.FailingBlobs{Blobs: b.Blobs}, now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	r.imgs = images.New(r.blobs)
	r.log = transcript.New(transcript.Config{Table: b.Table, Blobs: r.blobs, Images: r.imgs})
	return r
}

func (r *realStores) clock() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }

func (r *realStores) advance(d time.Duration) { r.mu.Lock(); defer r.mu.Unlock(); r.now = r.now.Add(d) }

// memory is a Memory over the stores and c, reading descriptions when
// descs is set.
func (r *realStores) memory(c memory.Compactor, descs bool) *memory.Memory {
	cfg := memory.Config{Table: r.b.Table, Transcript: r.log, Images: r.imgs, Queue: r.b.Queue, Compactor: c, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if descs {
		cfg.Descriptions = r.imgs
	}
	m, err := memory.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// say logs a user message to chat and tells m; it returns the entry's id.
func (r *realStores) say(m *memory.Memory, tenant, chat, text string) int64 {
	ctx := context.Background()
	ch, ids, err := r.log.AppendChat(ctx, tenant, chat, []pi.Message{{Role: "user", Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(text)}}}}, "r-"+chat+"-"+text)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := m.Appended(ctx, ch, ids[0]+1); err != nil {
		r.t.Fatal(err)
	}
	return ids[0]
}

// leaf is the line of entry id's leaf, or "(unbuilt)".
func (r *realStores) leaf(m *memory.Memory, tenant, chat string, id int64) string {
	line, built, err := m.NodeLine(context.Background(), tenant, chat, 0, id)
	if err != nil {
		r.t.Fatal(err)
	}
	if !built {
		return "(unbuilt)"
	}
	return line
}

// TestImageLeavesThroughTheRealCompactorOnEveryBackend runs image-aware
// leaves through the real transcript, image store, memory and compactor
// on the embedded stores and on the AWS adapters: a short message naming
// a kept image is summarized with it under its label, one naming no kept
// image stays word for word, a failed read leaves the leaf to a retry 10 s
// later that sends the image, and a rejected image is asked once more by
// name only, the short message then keeping its words.
func TestImageLeavesThroughTheRealCompactorOnEveryBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("real stores: not in -short")
	}
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			r := newRealStores(t, b)
			var down atomic.Bool
			r.blobs.FailGet = func(key string) error {
				if down.Load() && strings.Contains(key, "images") {
					return testenv.Outage(key)
				}
				return nil
			}
			seeing := &seeingModel{}
			m := r.memory(compactor.New(seeing, compactor.Options{}), false)
			const tenant, chat = "t1", "pictures"
			red, err := r.imgs.Put(ctx, tenant, dotPNG(t, color.RGBA{R: 255, A: 255}))
			if err != nil {
				t.Fatal(err)
			}
			say := func(text string) int64 { return r.say(m, tenant, chat, text) }
			leaf := func(id int64) string { return r.leaf(m, tenant, chat, id) }

			// A failed image read: the leaf waits for its retry.
			down.Store(true)
			shown := say("what is this? " + refs.Ref(red))
			var re *memory.RetryError
			if err := m.Build(ctx, tenant, chat, 0, shown); !errors.As(err, &re) || re.After != memory.DefaultRetry {
				t.Fatalf("build during an image outage: %v", err)
			}
			if leaf(shown) != "(unbuilt)" || seeing.imageParts() != 0 {
				t.Fatal("the leaf was built without its image")
			}
			down.Store(false)
			r.advance(memory.DefaultRetry)
			if err := m.Build(ctx, tenant, chat, 0, shown); err != nil {
				t.Fatal(err)
			}
			if got := leaf(shown); got != "saw "+refs.Ref(red) {
				t.Fatalf("short image message = %q, want the model's line about its image", got)
			}

			// No kept image: word for word, no call.
			calls := len(seeing.calls)
			plain := say("and this one? " + refs.Ref("0123456789abcdef"))
			if err := m.Build(ctx, tenant, chat, 0, plain); err != nil {
				t.Fatal(err)
			}
			if got := leaf(plain); got != "user: and this one? "+refs.Ref("0123456789abcdef") || len(seeing.calls) != calls {
				t.Fatalf("message naming a missing image = %q after %d calls", got, len(seeing.calls)-calls)
			}

			// A rejected image: once more by name only; the short message keeps its words.
			seeing.reject = true
			rejected := say("and again: " + refs.Ref(red))
			if err := m.Build(ctx, tenant, chat, 0, rejected); err != nil {
				t.Fatal(err)
			}
			if got := leaf(rejected); got != "user: and again: "+refs.Ref(red) {
				t.Fatalf("rejected image message = %q", got)
			}
			st, err := m.Status(ctx, tenant, chat)
			if err != nil {
				t.Fatal(err)
			}
			if st.Images.NamesOnly != 1 || st.Images.Attached != 2 || st.Images.Missing != 1 {
				t.Errorf("status images %+v", st.Images)
			}
		})
	}
}
