package memory

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"sync/atomic"
	"testing"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

func pngBase64(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestImageLeavesOnRealStores runs the image rules through the real
// transcript and image store on every backend: a kept image is sent with a
// short message, a never-stored one leaves it word for word, and a failed
// read leaves the leaf unbuilt until a retry ten seconds later.
func TestImageLeavesOnRealStores(t *testing.T) {
	if testing.Short() {
		t.Skip("real stores: not in -short")
	}
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			var down atomic.Bool
			blobs := &testenv.FailingBlobs{Blobs: b.Blobs, FailGet: func(key string) error {
				if down.Load() {
					return testenv.Outage(key)
				}
				return nil
			}}
			imgs := images.New(blobs)
			log := transcript.New(transcript.Config{Table: b.Table, Blobs: blobs, Images: imgs})
			f := newFixture(t)
			f.comp.script = func(c CompactRequest) (Compacted, error) {
				return Compacted{Line: "a red dot on white", Attempts: 1, Model: "scripted", Attached: len(c.Images)}, nil
			}
			m, err := New(Config{Table: b.Table, Transcript: log, Images: imgs, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			f.m = m
			name, err := imgs.Put(ctx, f.tenant, pngBase64(t))
			if err != nil {
				t.Fatal(err)
			}
			say := func(text string) int64 {
				ch, ids, err := log.AppendChat(ctx, f.tenant, f.chat, []pi.Message{{Role: "user", Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(text)}}}}, "receipt-"+text)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Appended(ctx, ch, ids[0]+1); err != nil {
					t.Fatal(err)
				}
				return ids[0]
			}

			// The image store is down: the leaf waits.
			down.Store(true)
			withImage := say("what is this? " + refs.Ref(name))
			later := f.deliverAll(t)
			if _, ok := f.row(t, Node{0, withImage}); ok || len(later) != 1 || later[0].delay != DefaultRetry {
				t.Fatalf("leaf built during the outage, or not retried in %s: %+v", DefaultRetry, later)
			}
			var re *RetryError
			if err := m.Build(ctx, f.tenant, f.chat, 0, withImage); !errors.As(err, &re) || !errors.Is(err, errNotDue) {
				t.Fatalf("a delivery before the delay: %v", err)
			}

			// Back up: ten seconds on the leaf is built with the image.
			down.Store(false)
			f.clock.Add(DefaultRetry)
			if err := m.Build(ctx, f.tenant, f.chat, 0, withImage); err != nil {
				t.Fatal(err)
			}
			c := f.comp.last()
			if len(c.Images) != 1 || c.Images[0].Name != name || c.Images[0].MimeType != "image/png" {
				t.Fatalf("images sent %+v", c.Images)
			}
			if row, _ := f.row(t, Node{0, withImage}); row.Text != "a red dot on white" || row.Attached != 1 {
				t.Errorf("leaf %+v", row)
			}

			// A never-stored image: word for word.
			plain := say("and this? " + refs.Ref("0123456789abcdef"))
			f.deliverAll(t)
			if row, _ := f.row(t, Node{0, plain}); !row.Verbatim || row.Text != "user: and this? "+refs.Ref("0123456789abcdef") {
				t.Errorf("leaf naming a missing image = %+v", row)
			}
			if f.comp.total() != 1 {
				t.Errorf("%d compactor calls, want 1", f.comp.total())
			}
			// Zoom gives the image back from the store, under its name.
			res, err := m.Zoom(ctx, f.tenant, f.chat, wire.ZoomArgs{ID: withImage})
			if err != nil || len(res.Content) != 2 || res.Content[1].Name != name {
				t.Errorf("zoom = %+v, %v", res, err)
			}
		})
	}
}

var _ Images = (*images.Store)(nil)
var _ Transcript = (*transcript.Log)(nil)
var _ transcript.Notifier = (*Memory)(nil)
