package images_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/testenv"
)

// blobBackend is one store the Store tests run over.
type blobBackend struct {
	name  string
	blobs store.Blobs
}

// blobBackends are an in-memory store and every real backend: the embedded
// store and the S3 adapter on a local S3 server.
func blobBackends(t *testing.T) []blobBackend {
	backends := []blobBackend{{"memory", storefake.NewBlobs()}}
	for _, b := range testenv.All(t) {
		backends = append(backends, blobBackend{b.Name, b.Blobs})
	}
	return backends
}

// putWays are the two ways into the store: Put, and PutPrepared of what
// Shrink prepared (for a caller that checks several images first).
var putWays = []struct {
	name string
	put  func(ctx context.Context, s *images.Store, tenant, b64 string) (string, error)
}{
	{"Put", func(ctx context.Context, s *images.Store, tenant, b64 string) (string, error) {
		return s.Put(ctx, tenant, b64)
	}},
	{"PutPrepared", func(ctx context.Context, s *images.Store, tenant, b64 string) (string, error) {
		p, err := images.Shrink(context.Background(), b64)
		if err != nil {
			return "", err
		}
		return p.Name, s.PutPrepared(ctx, tenant, p)
	}},
}

func TestStoreKeepsTheImageUnderItsName(t *testing.T) {
	for _, b := range blobBackends(t) {
		for _, way := range putWays {
			t.Run(b.name+"/"+way.name, func(t *testing.T) {
				testStoreKeepsTheImage(t, images.New(b.blobs), way.put)
			})
		}
	}
}

func testStoreKeepsTheImage(t *testing.T, s *images.Store, put func(context.Context, *images.Store, string, string) (string, error)) {
	ctx := t.Context()
	data := pngBytes(t, gradient(20, 10))
	in := b64(data)
	name, err := put(ctx, s, "acme", in)
	if err != nil {
		t.Fatal(err)
	}
	if name != images.Name(in) {
		t.Errorf("name %s, want Name of the input %s", name, images.Name(in))
	}
	img, err := s.Get(ctx, "acme", name)
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != name || img.MimeType != images.PNG || !bytes.Equal(img.Data, data) {
		t.Errorf("Get = %s %s %d bytes, want %s image/png %d bytes", img.Name, img.MimeType, len(img.Data), name, len(data))
	}
	info, err := s.Head(ctx, "acme", name)
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != images.PNG || info.Size != int64(len(data)) {
		t.Errorf("Head = %+v", info)
	}
}

func TestPutPreparedRefusesWhatShrinkDidNotPrepare(t *testing.T) {
	good, err := images.Shrink(context.Background(), b64(pngBytes(t, gradient(4, 4))))
	if err != nil {
		t.Fatal(err)
	}
	noName, noData := good, good
	noName.Name = "../other"
	noData.Data = nil
	tests := []struct {
		name   string
		tenant string
		p      images.Prepared
	}{
		{"empty tenant", "", good},
		{"zero value", "acme", images.Prepared{}},
		{"name no Put makes", "acme", noName},
		{"no bytes", "acme", noData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blobs := storefake.NewBlobs()
			if err := images.New(blobs).PutPrepared(t.Context(), tt.tenant, tt.p); err == nil {
				t.Error("PutPrepared accepted it")
			}
			if n := blobs.Len(); n != 0 {
				t.Errorf("%d objects reached the store", n)
			}
		})
	}
}

func TestCallerMimeTypeIsIgnored(t *testing.T) {
	// The store takes no type from the caller at all: what a host claims in
	// its mimeType field never reaches it. Each image is stored as its bytes say.
	tests := []struct {
		name    string
		claimed string
		data    []byte
		stored  string
	}{
		{"PNG sent as JPEG", images.JPEG, pngBytes(t, gradient(8, 8)), images.PNG},
		{"JPEG sent as PNG", images.PNG, jpegBytes(t, gradient(8, 8)), images.JPEG},
		{"WebP sent as GIF", images.GIF, webpFile(t, "small.webp"), images.WebP},
	}
	for _, b := range blobBackends(t) {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				if got, _ := images.Detect(tt.data); got != tt.stored {
					t.Fatalf("Detect = %s, want %s", got, tt.stored)
				}
				s := images.New(b.blobs)
				name, err := s.Put(t.Context(), "acme", b64(tt.data))
				if err != nil {
					t.Fatal(err)
				}
				img, err := s.Get(t.Context(), "acme", name)
				if err != nil {
					t.Fatal(err)
				}
				if img.MimeType != tt.stored {
					t.Errorf("stored as %s, want %s (claimed %s)", img.MimeType, tt.stored, tt.claimed)
				}
			})
		}
	}
}

func TestStorePutTwiceIsANoOp(t *testing.T) {
	for _, b := range blobBackends(t) {
		for _, way := range putWays {
			t.Run(b.name+"/"+way.name, func(t *testing.T) {
				testPutTwiceIsANoOp(t, b.blobs, way.put)
			})
		}
	}
}

func testPutTwiceIsANoOp(t *testing.T, blobs store.Blobs, put func(context.Context, *images.Store, string, string) (string, error)) {
	s := images.New(blobs)
	data := pngBytes(t, gradient(20, 10))
	in := b64(data)
	var wg sync.WaitGroup
	names := make([]string, 8)
	errs := make([]error, 8)
	for i := range names {
		wg.Go(func() { names[i], errs[i] = put(t.Context(), s, "acme", in) })
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || names[i] != images.Name(in) {
			t.Errorf("put %d = %q, %v", i, names[i], errs[i])
		}
	}
	img, err := s.Get(t.Context(), "acme", images.Name(in))
	if err != nil || !bytes.Equal(img.Data, data) {
		t.Errorf("after concurrent puts Get = %d bytes, %v", len(img.Data), err)
	}
	if mem, ok := blobs.(*storefake.Blobs); ok && mem.Len() != 1 {
		t.Errorf("%d blobs stored, want 1", mem.Len())
	}
}

func TestStoreShrinksBeforeStoring(t *testing.T) {
	for _, b := range blobBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := images.New(b.blobs)
			in := b64(pngBytes(t, gradient(3000, 100)))
			name, err := s.Put(t.Context(), "acme", in)
			if err != nil {
				t.Fatal(err)
			}
			if name != images.Name(in) {
				t.Errorf("a shrunk image is named %s, want the input's name %s", name, images.Name(in))
			}
			img, err := s.Get(t.Context(), "acme", name)
			if err != nil {
				t.Fatal(err)
			}
			if cfg := config(t, img.Data); img.MimeType != images.JPEG || cfg.Width != 2048 {
				t.Errorf("stored %s of %d px wide, want JPEG of 2048", img.MimeType, cfg.Width)
			}
		})
	}
}

func TestStoreNamespacesAreTenants(t *testing.T) {
	for _, b := range blobBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := images.New(b.blobs)
			name, err := s.Put(t.Context(), "acme", b64(pngBytes(t, gradient(5, 5))))
			if err != nil {
				t.Fatal(err)
			}
			for _, tenant := range []string{"other", "acme/..", ""} {
				if _, err := s.Get(t.Context(), tenant, name); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("tenant %q read acme's image: err = %v", tenant, err)
				}
			}
		})
	}
}

func TestStoreMissingImageIsNotFound(t *testing.T) {
	for _, b := range blobBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := images.New(b.blobs)
			for _, name := range []string{"0123456789abcdef", "../acme/0123456789abcdef", "0123456789ABCDEF", ""} {
				if _, err := s.Get(t.Context(), "acme", name); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Get(%q) err = %v, want store.ErrNotFound", name, err)
				}
				if _, err := s.Head(t.Context(), "acme", name); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Head(%q) err = %v, want store.ErrNotFound", name, err)
				}
			}
		})
	}
}

func TestStoreBadImageIsRefusedAndNotStored(t *testing.T) {
	tests := []struct {
		name string
		text string
		want error
	}{
		{"not base64", "not base64!", images.ErrInvalidBase64},
		{"not an image", b64([]byte("%PDF-1.7 a document")), images.ErrUnsupported},
		{"a bomb", b64(withDeclaredSize(t, pngBytes(t, gradient(4, 4)), 30000, 30000)), images.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blobs := storefake.NewBlobs()
			_, err := images.New(blobs).Put(t.Context(), "acme", tt.text)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
				t.Errorf("bad input reported as a store error: %v", err)
			}
			if n := blobs.Len(); n != 0 {
				t.Errorf("%d objects reached the store", n)
			}
		})
	}
}

func TestStoreOutageIsUnavailable(t *testing.T) {
	for _, b := range blobBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			in := b64(pngBytes(t, gradient(4, 4)))
			name, err := images.New(b.blobs).Put(ctx, "acme", in)
			if err != nil {
				t.Fatal(err)
			}
			down := images.New(&testenv.FailingBlobs{Blobs: b.blobs, FailPut: testenv.Outage, FailGet: testenv.Outage, FailHead: testenv.Outage})
			if _, err := down.Put(ctx, "acme", b64(pngBytes(t, gradient(5, 5)))); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Put err = %v, want store.ErrUnavailable", err)
			}
			if _, err := down.Get(ctx, "acme", name); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get err = %v, want store.ErrUnavailable and not ErrNotFound", err)
			}
			if _, err := down.Head(ctx, "acme", name); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Head err = %v, want store.ErrUnavailable", err)
			}
		})
	}
}

func TestDescriptionIsWrittenOnceBesideTheImageAndCapped(t *testing.T) {
	ctx := context.Background()
	for _, b := range blobBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := images.New(b.blobs)
			const name = "0123456789abcdef"
			if _, err := s.Description(ctx, "t1", name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("description before any: %v", err)
			}
			long := "a  login\npage [image " + name + "] " + strings.Repeat("é", 400)
			if err := s.PutDescription(ctx, "t1", name, long); err != nil {
				t.Fatal(err)
			}
			if err := s.PutDescription(ctx, "t1", name, "a second description"); err != nil {
				t.Fatal(err)
			}
			got, err := s.Description(ctx, "t1", name)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > images.MaxDescription || !utf8.ValidString(got) || !strings.HasPrefix(got, "a login page (image "+name+") éé") {
				t.Fatalf("description %d bytes: %q", len(got), got)
			}
			if _, err := s.Description(ctx, "t2", name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("another tenant reads the description: %v", err)
			}
			if err := s.PutDescription(ctx, "t1", name, " \n "); err == nil {
				t.Fatal("an empty description was accepted")
			}
			if err := s.PutDescription(ctx, "t1", "../../x", "d"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a crafted name: %v", err)
			}
		})
	}
}

func FuzzCleanDescription(f *testing.F) {
	f.Add("a red [banner]\n\t\"Invalid token\"")
	f.Add(strings.Repeat("日本", 200))
	f.Add("a\x00b\x1bc\u0085d\x7f")
	f.Fuzz(func(t *testing.T, s string) {
		d := images.CleanDescription(s)
		if len(d) > images.MaxDescription || !utf8.ValidString(d) || strings.ContainsAny(d, "[]\n\r\t") || d != strings.TrimSpace(d) ||
			strings.ContainsFunc(d, unicode.IsControl) {
			t.Fatalf("CleanDescription(%q) = %q", s, d)
		}
		if images.CleanDescription(d) != d {
			t.Fatalf("not idempotent: %q", d)
		}
	})
}
