// Package local wires the local server (durachat serve): its stores, all
// in one embedded database under the data directory, the signed links it
// serves, and who may call it.
package local

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/embedded"
)

// QueueName names the embedded queue that stands in for the SQS queue.
const QueueName = "compact"

// Data is the local server's stores, all in one embedded database under
// the configured data directory.
type Data struct {
	DB     *embedded.DB
	Stores app.Stores
	// Queue is both sides of the build queue, consumed in-process.
	Queue *embedded.Queue
	Links *embedded.Linker
}

// Open opens (or creates) the embedded stores in cfg.DataDir. Without a
// configured link secret, links are signed with a random one and stop
// working when the process ends; they live minutes anyway.
func Open(cfg config.Config) (*Data, error) {
	secret := cfg.LinkSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // crypto/rand.Read does not fail.
	}
	db, err := embedded.Open(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	q := db.Queue(QueueName)
	links := embedded.NewLinker(cfg.PublicURL, secret)
	return &Data{
		DB:     db,
		Stores: app.Stores{Table: db.Table(), Blobs: db.Blobs(), Linker: links, Uploader: links, Queue: q, Receiver: q, Scrubber: db},
		Queue:  q,
		Links:  links,
	}, nil
}

// LinkRoutes serves the signed links the local Linker makes. They are
// public: the signature is the credential, and a link is served only while
// the chat it was made through names the image.
func (d *Data) LinkRoutes() api.Routes {
	h := d.Links.Handler(d.Stores.Blobs, chatid.New(d.Stores.Table).NamedThrough)
	return api.RegisterFunc(func(mux *http.ServeMux) {
		mux.Handle("GET "+embedded.LinkPath+"{key...}", h)
	})
}

// UploadRoutes serves the upload targets the local Linker makes: the bytes
// a host PUTs are checked and stored by accept (hooks.Uploads.Accept) as
// they arrive. They are public: the signature is the credential.
func (d *Data) UploadRoutes(accept func(ctx context.Context, key string, data []byte) error) api.Routes {
	h := d.Links.UploadHandler(accept)
	return api.RegisterFunc(func(mux *http.ServeMux) {
		mux.Handle("PUT "+embedded.UploadPath+"{key...}", h)
	})
}

// Close closes the database.
func (d *Data) Close() error { return d.DB.Close() }

// Auth authenticates requests to the local server: bearer tokens when
// configured, else every request is the one local tenant (and the server
// listens on loopback only; see CheckListen).
func Auth(cfg config.Config) api.Authenticator {
	if len(cfg.Tokens) > 0 {
		return api.BearerTokens(cfg.Tokens)
	}
	return api.SingleTenant(config.LocalTenant)
}

// ErrOpenListen refuses a listen address reachable from other machines
// when no tokens are configured.
type ErrOpenListen struct{ Addr string }

func (e *ErrOpenListen) Error() string {
	return fmt.Sprintf("refusing to listen on %s without tokens: with no %s configured every caller is the single tenant %q, "+
		"so the server listens on loopback only. Set %s to a loopback address (such as %s) or configure %s (token=tenant,...)",
		e.Addr, config.EnvTokens, config.LocalTenant, config.EnvAddr, config.DefaultAddr, config.EnvTokens)
}

// CheckListen refuses addr when it is not loopback and no tokens are
// configured. "localhost" and loopback IPs (127.0.0.0/8, ::1) pass; an
// empty host (all interfaces) or any other name does not.
func CheckListen(addr string, haveTokens bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", config.EnvAddr, addr, err)
	}
	if haveTokens || isLoopback(host) {
		return nil
	}
	return &ErrOpenListen{Addr: addr}
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
