// Package ui serves the memory browser: a few static pages, embedded in the
// binary, that show a chat's view, summary tree, build progress and images.
// The pages carry no data: they read everything from the authenticated JSON
// API in the browser, with the caller's own token, so their route is
// public, locally and behind API Gateway's JWT authorizer alike.
package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/store"
)

// Prefix is where the browser is served; GET /ui redirects into it.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// policy lets the pages load only their own scripts and styles and call
// only their own origin. Images come from the pages' own fetches (blob:),
// a zoom's answer (data:), and the signed links of the message log: their
// own origin locally, the bucket's in AWS (imageOrigins), and no other.
func policy(imageOrigins []string) string {
	img := "'self' blob: data:"
	for _, o := range imageOrigins {
		img += " " + o
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
		"img-src " + img + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// LinkOrigin is the origin of the signed links l makes (the bucket's, in
// AWS), read from a link it signs for a key that need not exist; nil
// makes no links, and has none.
func LinkOrigin(ctx context.Context, l store.Linker) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	link, err := l.URL(ctx, store.LinkOriginKey(), store.LinkChat{}, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("ui: signing a link to read its origin: %w", err)
	}
	o, err := Origin(link)
	if err != nil {
		return nil, err
	}
	return []string{o}, nil
}

// Origin is the origin (scheme://host[:port]) of rawURL, in the form a
// content security policy names a source by, or an error when it has none.
func Origin(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("ui: image origin: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(u.Host, " ;,'") {
		return "", fmt.Errorf("ui: image origin: %q is not an http(s) URL with a host", rawURL)
	}
	return u.Scheme + "://" + u.Host, nil
}

type asset struct {
	data []byte
	etag string
}

// Routes serves the embedded assets under Prefix. They are public: they
// hold no data, and the pages they make ask the API with a token.
type Routes struct {
	files  map[string]asset
	policy string
}

// New reads the embedded assets once. imageOrigins are the origins of the
// signed image links the API gives (Origin), which the pages may show.
func New(imageOrigins ...string) *Routes {
	rt := &Routes{files: map[string]asset{}, policy: policy(imageOrigins)}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rt.files[p[len("assets/"):]] = asset{data: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The assets are compiled in; failing to read them is a build bug.
		panic(fmt.Sprintf("ui: reading embedded assets: %v", err))
	}
	return rt
}

// Register adds GET /ui, a redirect to the index (a path API Gateway
// routes whether or not it matches "/ui/" to a greedy variable), and
// GET /ui/{file...}.
func (rt *Routes) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"index.html", http.StatusFound)
	})
	api.Handle(mux, "GET "+Prefix+"{file...}", rt.serve)
}

func (rt *Routes) serve(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if name == "" {
		name = "index.html"
	}
	a, ok := rt.files[name]
	if !ok || path.Clean(name) != name {
		return api.NotFound("the memory browser has no file %q", name)
	}
	h := w.Header()
	h.Set("Content-Security-Policy", rt.policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Revalidated on every load, so a new deployment shows at once.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
	return nil
}
