package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
)

// uploadEnv serves the upload route, the offload hooks and before-request
// over one kind of store, as the deployment wires them: on the embedded
// store uploads are checked as they arrive (the local server); on S3 they
// are staged under uploads/ and checked when a ref claims them.
type uploadEnv struct {
	name  string
	blobs store.Blobs
	srv   *httptest.Server
	left  func(t *testing.T) []string // the staged keys
}

func eachUploadBackend(t *testing.T, ttl time.Duration, fn func(t *testing.T, e *uploadEnv)) {
	for _, name := range []string{"embedded", "s3"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newUploadEnv(t, name, ttl))
		})
	}
}

func newUploadEnv(t *testing.T, kind string, ttl time.Duration) *uploadEnv {
	e := &uploadEnv{name: kind}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	var (
		imgs    *images.Store
		targets store.Uploader
		// The images' references; the upload tests' subject is elsewhere.
		table store.Table = storefake.NewTable()
	)
	switch kind {
	case "embedded":
		db, err := embedded.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		secret := make([]byte, 32)
		rand.Read(secret)
		links := embedded.NewLinker(base, secret)
		e.blobs = db.Blobs()
		table = db.Table()
		imgs = images.New(e.blobs)
		targets = links
		e.left = func(*testing.T) []string { return nil } // nothing is ever staged
	case "s3":
		s := awstest.StartS3(t)
		bucket := s.CreateBucket(t)
		b := s3blobs.New(s.Client, bucket)
		e.blobs = b
		imgs = images.New(b)
		imgs.Staging = b
		targets = b
		e.left = func(t *testing.T) []string {
			out, err := s.Client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(store.UploadPrefix)})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range out.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			return keys
		}
	}
	chats := lifecycle.New(lifecycle.Config{Table: table, Blobs: e.blobs})
	up := NewUploads(imgs, targets, chats)
	up.TTL = ttl
	var public []api.Routes
	if links, ok := targets.(*embedded.Linker); ok {
		public = []api.Routes{api.RegisterFunc(func(mux *http.ServeMux) {
			mux.Handle("PUT "+embedded.UploadPath+"{key...}", links.UploadHandler(up.Accept))
		})}
	}
	h, err := api.NewHandler(api.Options{
		Auth:   api.SingleTenant(tenantA),
		Routes: []api.Routes{NewOffload(imgs, chats), up, NewRestore(imgs, nil)},
		Public: public,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	e.srv = srv
	return e
}

type uploadDesc struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Type   string `json:"type"`
	SHA256 string `json:"sha256"`
}

// describe is what a host sends to ask for an upload of data.
func describe(data []byte) uploadDesc {
	sum := sha256.Sum256(data)
	return uploadDesc{Name: images.Name(base64.StdEncoding.EncodeToString(data)), Size: int64(len(data)), Type: images.PNG, SHA256: hex.EncodeToString(sum[:])}
}

func (e *uploadEnv) call(t *testing.T, method, url string, header map[string]string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Content-Length" {
			continue // the body's own length is sent
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

type uploadAnswerT struct {
	Name   string              `json:"name"`
	Stored bool                `json:"stored"`
	Upload *store.UploadTarget `json:"upload"`
}

func (e *uploadEnv) ask(t *testing.T, d uploadDesc) uploadAnswerT {
	t.Helper()
	body, _ := json.Marshal(d)
	status, out := e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/uploads", nil, body)
	if status != http.StatusOK {
		t.Fatalf("uploads: %d %s", status, out)
	}
	var a uploadAnswerT
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *uploadEnv) afterTool(t *testing.T, blocks ...any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(obj{"call": obj{"id": "c", "name": "shot"}, "result": obj{"content": blocks}})
	return e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/hooks/after-tool", nil, body)
}

func (e *uploadEnv) stored(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.blobs.Head(context.Background(), store.ImageKey(tenantA, name))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// nothingLeft checks that a refused upload left no image and nothing staged.
func (e *uploadEnv) nothingLeft(t *testing.T, name string) {
	t.Helper()
	if e.stored(t, name) {
		t.Errorf("image %s is stored", name)
	}
	if keys := e.left(t); len(keys) > 0 {
		t.Errorf("left staged: %v", keys)
	}
}

func TestUploadThenRefStoresTheImageUnderItsInlineName(t *testing.T) {
	eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
		// Wider than MaxSide: stored shrunk, as it would be inline.
		data := pngBytes(t, 3, images.MaxSide+200, 40, false)
		d := describe(data)
		a := e.ask(t, d)
		if a.Stored || a.Upload == nil || a.Upload.Method != http.MethodPut || a.Name != d.Name {
			t.Fatalf("answer %+v, want an upload target for %s", a, d.Name)
		}
		if a.Upload.Header["Content-Length"] != strconv.Itoa(len(data)) {
			t.Fatalf("target headers %v do not bind the size", a.Upload.Header)
		}
		if status, out := e.call(t, a.Upload.Method, a.Upload.URL, a.Upload.Header, data); status != http.StatusOK {
			t.Fatalf("PUT: %d %s", status, out)
		}
		ref := refs.Ref(d.Name)
		status, out := e.afterTool(t, textBlock("took it"), textBlock(ref))
		if status != http.StatusOK {
			t.Fatalf("after-tool with the ref: %d %s", status, out)
		}
		if !e.stored(t, d.Name) {
			t.Fatal("the uploaded image is not stored under its name")
		}
		if keys := e.left(t); len(keys) > 0 {
			t.Errorf("the claimed upload is still staged: %v", keys)
		}
		// Asked again: already stored, nothing to upload.
		if a := e.ask(t, d); !a.Stored || a.Upload != nil {
			t.Fatalf("second ask %+v, want stored with no upload", a)
		}
		// The same image inline gets the same name.
		var inline struct{ Stored []string }
		status, out = e.afterTool(t, imageBlock(base64.StdEncoding.EncodeToString(data)))
		if status != http.StatusOK || json.Unmarshal(out, &inline) != nil || len(inline.Stored) != 1 || inline.Stored[0] != d.Name {
			t.Fatalf("inline after-tool: %d %s; want stored [%s]", status, out, d.Name)
		}
		// And it is shrunk like an inline image: restore sends a JPEG.
		body, _ := json.Marshal(obj{"format": "pi", "request": obj{"messages": list{obj{"role": "user", "content": list{textBlock(ref)}}}}})
		status, out = e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/hooks/before-request", nil, body)
		if status != http.StatusOK || !bytes.Contains(out, []byte(`"mimeType":"image/jpeg"`)) {
			t.Fatalf("before-request: %d %.300s", status, out)
		}
	})
}

func TestUploadFailuresLeaveNothingBehind(t *testing.T) {
	img := pngBytes(t, 5, 30, 30, false)
	notImage := bytes.Repeat([]byte("not an image at all "), 40)
	cases := []struct {
		name string
		data []byte        // what the target is asked for
		sent func() []byte // what the host PUTs
		// The PUT's answer on each backend: S3 checks size (the signed
		// Content-Length) and checksum itself; the local server also checks
		// the image as it arrives.
		putEmbedded, putS3 int
	}{
		{"SizeMismatch", img, func() []byte { return append(bytes.Clone(img), 0) }, http.StatusBadRequest, http.StatusForbidden},
		{"ChecksumMismatch", img, func() []byte { b := bytes.Clone(img); b[len(b)-5] ^= 0xff; return b }, http.StatusBadRequest, http.StatusBadRequest},
		{"NotAnImage", notImage, func() []byte { return notImage }, http.StatusBadRequest, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
				d := describe(c.data)
				a := e.ask(t, d)
				status, out := e.call(t, a.Upload.Method, a.Upload.URL, a.Upload.Header, c.sent())
				want := map[string]int{"embedded": c.putEmbedded, "s3": c.putS3}[e.name]
				if status != want {
					t.Fatalf("PUT: %d %s, want %d", status, out, want)
				}
				// The ref is refused with the block named, and nothing stays.
				status, out = e.afterTool(t, textBlock("x"), textBlock(refs.Ref(d.Name)))
				wantError(t, status, out, http.StatusBadRequest, "result.content[1]")
				e.nothingLeft(t, d.Name)
			})
		})
	}
}

// The JSON body limit (api.MaxBody) is not the upload limit: an image
// between the two completes on every backend.
func TestAnUploadPastTheJSONBodyLimitCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 MiB upload: not in -short")
	}
	data := pngBytes(t, 9, 1900, 1900, true)
	if len(data) <= api.MaxBody || len(data) > images.MaxUploadBytes {
		t.Fatalf("the image is %d bytes: want it past %d and within %d", len(data), api.MaxBody, images.MaxUploadBytes)
	}
	eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
		d := describe(data)
		a := e.ask(t, d)
		if a.Upload == nil {
			t.Fatalf("answer %+v, want an upload target", a)
		}
		if status, out := e.call(t, a.Upload.Method, a.Upload.URL, a.Upload.Header, data); status != http.StatusOK {
			t.Fatalf("PUT of %d bytes: %d %s", len(data), status, out)
		}
		if status, out := e.afterTool(t, textBlock(refs.Ref(d.Name))); status != http.StatusOK {
			t.Fatalf("after-tool with the ref: %d %s", status, out)
		}
		if !e.stored(t, d.Name) {
			t.Fatal("the uploaded image is not stored under its name")
		}
	})
}

func TestUploadRefusedWhenTooLarge(t *testing.T) {
	eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
		d := describe([]byte("x"))
		d.Size = images.MaxUploadBytes + 1
		body, _ := json.Marshal(d)
		status, out := e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/uploads", nil, body)
		wantError(t, status, out, http.StatusRequestEntityTooLarge, "size")
	})
}

func TestUploadRequestIsChecked(t *testing.T) {
	good := describe(pngBytes(t, 1, 4, 4, false))
	cases := map[string]func(d *uploadDesc){
		"name":   func(d *uploadDesc) { d.Name = "ABC" },
		"size":   func(d *uploadDesc) { d.Size = 0 },
		"type":   func(d *uploadDesc) { d.Type = "image/bmp" },
		"sha256": func(d *uploadDesc) { d.SHA256 = "abc" },
	}
	e := newUploadEnv(t, "embedded", 0)
	for field, spoil := range cases {
		d := good
		spoil(&d)
		body, _ := json.Marshal(d)
		status, out := e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/uploads", nil, body)
		wantError(t, status, out, http.StatusBadRequest, field)
	}
}

func TestUploadTargetExpires(t *testing.T) {
	eachUploadBackend(t, time.Second, func(t *testing.T, e *uploadEnv) {
		data := pngBytes(t, 6, 10, 10, false)
		a := e.ask(t, describe(data))
		time.Sleep(time.Until(a.Upload.Expires) + 1100*time.Millisecond)
		status, out := e.call(t, a.Upload.Method, a.Upload.URL, a.Upload.Header, data)
		want := map[string]int{"embedded": http.StatusGone, "s3": http.StatusForbidden}[e.name]
		if status != want {
			t.Fatalf("PUT after expiry: %d %s, want %d", status, out, want)
		}
		e.nothingLeft(t, a.Name)
	})
}

func TestRefToAnUploadNeverCompletedIsRefused(t *testing.T) {
	eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
		d := describe(pngBytes(t, 7, 10, 10, false))
		e.ask(t, d) // a target is made, nothing is sent to it
		status, out := e.afterTool(t, textBlock(refs.Ref(d.Name)))
		wantError(t, status, out, http.StatusBadRequest, "result.content[0]")
		body, _ := json.Marshal(obj{"message": obj{"role": "user", "content": list{textBlock("see"), textBlock(refs.Ref(d.Name))}}})
		status, out = e.call(t, http.MethodPost, e.srv.URL+"/v1/chats/c1/hooks/offload-input", nil, body)
		wantError(t, status, out, http.StatusBadRequest, "message.content[1]")
		e.nothingLeft(t, d.Name)
	})
}

func TestARequestWithARefToNothingClaimsNoneOfItsUploads(t *testing.T) {
	eachUploadBackend(t, 0, func(t *testing.T, e *uploadEnv) {
		data := pngBytes(t, 9, 12, 12, false)
		d := describe(data)
		a := e.ask(t, d)
		if status, out := e.call(t, a.Upload.Method, a.Upload.URL, a.Upload.Header, data); status != http.StatusOK {
			t.Fatalf("PUT: %d %s", status, out)
		}
		staged := e.left(t)
		status, out := e.afterTool(t, textBlock(refs.Ref(d.Name)), textBlock(refs.Ref("0123456789abcdef")))
		wantError(t, status, out, http.StatusBadRequest, "result.content[1]")
		// Where uploads wait to be claimed (S3), this one still waits.
		if left := e.left(t); !slices.Equal(left, staged) {
			t.Fatalf("staged before %v, after the refused request %v: want it unclaimed", staged, left)
		}
		if status, out := e.afterTool(t, textBlock(refs.Ref(d.Name))); status != http.StatusOK || !e.stored(t, d.Name) {
			t.Fatalf("the upload claimed alone: %d %s", status, out)
		}
	})
}
