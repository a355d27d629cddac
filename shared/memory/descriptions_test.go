package memory_test

import (
	"context"
	"errors"
	"image/color"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// describingModel sees images and, when a leaf task asks for descriptions,
// answers its line then one description line per image asked for, each
// describe long (to check the cap).
type describingModel struct {
	mu       sync.Mutex
	calls    int
	asked    []string // names whose description a call asked for
	describe string
}

var askedRef = regexp.MustCompile(`for each of: ((?:\[image [0-9a-f]{16}\](?:, )?)+)`)

func (m *describingModel) Name() string { return "describing" }
func (m *describingModel) Capabilities() model.Capabilities {
	return model.Capabilities{Images: true, MaxImages: 20}
}
func (m *describingModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	text := "the line about " + strings.Join(refsOf(req), " and ")
	if g := askedRef.FindStringSubmatch(req.Messages[0].Parts[1].Text); g != nil {
		for _, name := range refs.Names(g[1]) {
			m.asked = append(m.asked, name)
			text += "\ndescription of " + refs.Ref(name) + ": " + m.describe
		}
	}
	return model.Response{Text: text}, nil
}

func refsOf(req model.Request) []string {
	var out []string
	for k, p := range req.Messages[0].Parts {
		if p.Image != nil {
			out = append(out, req.Messages[0].Parts[k-1].Text)
		}
	}
	return out
}

func (m *describingModel) askedFor() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.asked...)
}

// TestDescriptionsOnEveryBackend: the leaf call that first shows an image
// also describes it, the line being what it would be without; the
// description is stored beside the image at most 300 bytes, once per
// tenant (a second chat naming the image makes no description request);
// a failed description write leaves the leaf to a retry 10 s later, like
// any leaf, which describes the image then; zoom and status show it; the
// offline model writes none.
func TestDescriptionsOnEveryBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("real stores: not in -short")
	}
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			r := newRealStores(t, b)
			var writeDown atomic.Bool
			r.blobs.FailPut = func(key string) error {
				if writeDown.Load() && strings.HasSuffix(key, ".description") {
					return testenv.Outage(key)
				}
				return nil
			}
			imgs := r.imgs
			seeing := &describingModel{describe: strings.Repeat("a red dot on white, ", 30)}
			m := r.memory(compactor.New(seeing, compactor.Options{}), true)
			const tenant = "t1"
			red, err := imgs.Put(ctx, tenant, dotPNG(t, color.RGBA{R: 255, A: 255}))
			if err != nil {
				t.Fatal(err)
			}
			say, line := func(m *memory.Memory, chat, text string) int64 { return r.say(m, tenant, chat, text) },
				func(m *memory.Memory, chat string, id int64) string { return r.leaf(m, tenant, chat, id) }

			// The write fails: the leaf is not built, and waits 10 s.
			writeDown.Store(true)
			first := say(m, "one", "what is this? "+refs.Ref(red))
			var re *memory.RetryError
			if err := m.Build(ctx, tenant, "one", 0, first); !errors.As(err, &re) || re.After != memory.DefaultRetry {
				t.Fatalf("build with the description write failing: %v", err)
			}
			if got := line(m, "one", first); got != "(unbuilt)" {
				t.Fatalf("leaf built without its description: %q", got)
			}
			if _, err := imgs.Description(ctx, tenant, red); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a description stored though its write failed: %v", err)
			}
			writeDown.Store(false)
			r.advance(memory.DefaultRetry)
			if err := m.Build(ctx, tenant, "one", 0, first); err != nil {
				t.Fatal(err)
			}
			if got, want := line(m, "one", first), "the line about "+refs.Ref(red); got != want {
				t.Fatalf("leaf line = %q, want %q: the descriptions changed it", got, want)
			}
			desc, err := imgs.Description(ctx, tenant, red)
			if err != nil {
				t.Fatal(err)
			}
			if len(desc) > images.MaxDescription || !strings.HasPrefix(desc, "a red dot on white,") {
				t.Fatalf("description %d bytes: %q", len(desc), desc)
			}
			if got := seeing.askedFor(); len(got) != 2 || got[0] != red || got[1] != red {
				t.Fatalf("descriptions asked for %v, want %s twice (the failed build and its retry)", got, red)
			}

			// Another chat of the tenant names the image: its leaf shows the
			// image but asks for no description, and the stored one stays.
			seeing.describe = "a different description"
			second := say(m, "two", "again "+refs.Ref(red))
			if err := m.Build(ctx, tenant, "two", 0, second); err != nil {
				t.Fatal(err)
			}
			if got := seeing.askedFor(); len(got) != 2 {
				t.Fatalf("a second chat asked again for a description: %v", got)
			}
			if again, _ := imgs.Description(ctx, tenant, red); again != desc {
				t.Fatalf("description changed to %q", again)
			}
			st, err := m.Status(ctx, tenant, "two")
			if err != nil {
				t.Fatal(err)
			}
			if st.Images.Described != 1 || st.Images.DescribeFailed != 0 || st.Images.DescribePending != 0 {
				t.Errorf("status of chat two: %+v", st.Images)
			}

			// zoom shows the description beside the ref.
			res, err := m.Zoom(ctx, tenant, "two", wire.ZoomArgs{ID: second})
			if err != nil {
				t.Fatal(err)
			}
			if want := refs.Ref(red) + " (description: " + desc + ")"; !strings.Contains(res.Content[0].Text, want) {
				t.Errorf("zoom text %q lacks %q", res.Content[0].Text, want)
			}

			// The offline model cannot see: it describes nothing, and the
			// image waits, counted pending.
			blue, err := imgs.Put(ctx, tenant, dotPNG(t, color.RGBA{B: 255, A: 255}))
			if err != nil {
				t.Fatal(err)
			}
			off := r.memory(compactor.New(offline.New(), compactor.Options{}), true)
			third := say(off, "three", "and "+refs.Ref(blue))
			if err := off.Build(ctx, tenant, "three", 0, third); err != nil {
				t.Fatal(err)
			}
			if _, err := imgs.Description(ctx, tenant, blue); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the offline model wrote a description: %v", err)
			}
			st, err = off.Status(ctx, tenant, "three")
			if err != nil {
				t.Fatal(err)
			}
			if st.Images.Described != 0 || st.Images.DescribePending != 1 {
				t.Errorf("status of chat three: %+v", st.Images)
			}
		})
	}
}

// A leaf whose builder wrote its row but could not record it is recorded
// by the next delivery from the row, and counts its image as its builder
// did: attached and described, nothing pending. (Before the row kept the
// description counts, such a leaf counted its image neither described nor
// pending, about one run in ten of the image-facts eval.)
func TestALeafRecordedFromItsRowCountsItsImageAsItsBuilderDid(t *testing.T) {
	for _, b := range testenv.All(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			var rowWritten, stateDown atomic.Bool
			b.Table = &testenv.FailingTable{Table: b.Table,
				FailCreate: func(k store.Key) error {
					if strings.HasPrefix(k.SK, store.NodePrefix) {
						rowWritten.Store(true)
					}
					return nil
				},
				FailUpdate: func(k store.Key) error {
					if k.SK == store.StateSK && stateDown.Load() && rowWritten.Load() {
						return testenv.KeyOutage(k)
					}
					return nil
				},
			}
			r := newRealStores(t, b)
			m := r.memory(compactor.New(&describingModel{describe: "a red dot"}, compactor.Options{}), true)
			const tenant = "t1"
			red, err := r.imgs.Put(ctx, tenant, dotPNG(t, color.RGBA{R: 255, A: 255}))
			if err != nil {
				t.Fatal(err)
			}
			id := r.say(m, tenant, "one", "what is this? "+refs.Ref(red))
			stateDown.Store(true)
			var re *memory.RetryError
			if err := m.Build(ctx, tenant, "one", 0, id); !errors.As(err, &re) {
				t.Fatalf("build with the state's write failing after the row: %v", err)
			}
			if !rowWritten.Load() {
				t.Fatal("the build wrote no row: the test recorded nothing from a row")
			}
			stateDown.Store(false)
			r.advance(re.After)
			if err := m.Build(ctx, tenant, "one", 0, id); err != nil {
				t.Fatal(err)
			}
			st, err := m.Status(ctx, tenant, "one")
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Images; got.Leaves != 1 || got.Attached != 1 || got.Described != 1 || got.DescribeFailed != 0 || got.DescribePending != 0 {
				t.Errorf("status images %+v, want one leaf, its image attached and described", got)
			}
		})
	}
}
