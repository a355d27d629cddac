package local

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/ui"
)

// Server timeouts. The longest request is a view wait, bounded well under
// API Gateway's 30 s; a 10 MB body over a slow link gets a minute.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 20 * time.Second
	// requestTimeout ends each request's work, as Lambda's timeouts end a
	// function's: a request that found a chat live (an append, a hook)
	// writes nothing into it after the sweep that follows the chat's
	// deletion (lifecycle.SettleAfter, well over twice this).
	requestTimeout = 2 * time.Minute
	purgeEvery     = time.Hour
	// expireEvery is how often chats idle past their retention are looked for.
	expireEvery = time.Hour
)

// MemoryLimit is the local server's soft memory limit (the Go runtime's)
// unless GOMEMLIMIT sets one: the collector works harder near it rather
// than let the heap double, which keeps the server's peak RSS under attack
// within 512 MB (docs/performance.md).
const MemoryLimit = 384 << 20

// Serve runs the local server (durachat serve): every route of every
// function in one process, on the embedded stores in cfg.DataDir, with the
// build queue consumed in-process. It listens on cfg.Addr, tells ready
// (when set) the bound address, and serves until ctx ends.
func Serve(ctx context.Context, cfg config.Config, logger *slog.Logger, ready func(net.Addr)) error {
	ln, err := listen(&cfg)
	if err != nil {
		return err
	}
	defer ln.Close()
	data, err := Open(cfg)
	if err != nil {
		return fmt.Errorf("opening the data directory: %w", err)
	}
	defer func() {
		if err := data.Close(); err != nil {
			logger.Error("closing the data directory", "err", err.Error())
		}
	}()
	mem, h, err := handler(ctx, cfg, data, logger)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           withDeadline(h, requestTimeout),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	stopWork := startWork(data, mem, logger)
	logger.Info("durachat serving", "addr", ln.Addr().String(), "data", cfg.DataDir, "auth", tenancy(cfg), "model", cfg.Model.String())
	if ready != nil {
		ready(ln.Addr())
	}
	return serveUntil(ctx, srv, ln, stopWork, logger)
}

// listen checks and binds cfg.Addr. Links and upload targets name the port
// the server got when it asked for any (":0"), so cfg.PublicURL is set to
// it then.
func listen(cfg *config.Config) (net.Listener, error) {
	if err := CheckListen(cfg.Addr, len(cfg.Tokens) > 0); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	if strings.HasSuffix(cfg.PublicURL, ":0") {
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	return ln, nil
}

// handler wires every route of every function over data, as the Lambda
// functions register them, and returns the memory they share.
func handler(ctx context.Context, cfg config.Config, data *Data, logger *slog.Logger) (*memoryapi.API, http.Handler, error) {
	stores := data.Stores
	models, err := openModels(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	mem, err := memoryapi.New(cfg, stores, models, logger, nil)
	if err != nil {
		return nil, nil, err
	}
	imgs := mem.Images
	// The hooks record their images for their chats in the chats the
	// memory routes delete.
	uploads := hooks.NewUploads(imgs, stores.Uploader, mem.Chats)
	// before-request restores only the images its chat names.
	restore := hooks.NewRestore(imgs, stores.Linker)
	restore.Chats = chatid.New(stores.Table)
	routes := []api.Routes{
		restore,                           // functions/restore
		hooks.NewOffload(imgs, mem.Chats), // functions/offload
		uploads,                           // functions/offload
	}
	routes = append(routes, mem.Routes()...) // functions/memory
	// The MCP endpoint keeps its sessions in this process (functions/memory
	// serves it stateless).
	routes = append(routes, mem.MCPRoutes(false))

	imageOrigins, err := ui.LinkOrigin(ctx, stores.Linker)
	if err != nil {
		return nil, nil, err
	}
	h, err := app.Handler(logger, Auth(cfg), stores, routes, data.LinkRoutes(), data.UploadRoutes(uploads.Accept), ui.New(imageOrigins...))
	if err != nil {
		return nil, nil, err
	}
	return mem, h, nil
}

// withDeadline gives each request's context a deadline d away.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// startWork starts the background work: purging expired items, deleting
// chats idle past their retention, and the in-process stand-in for the
// compact function. The returned func stops it and waits for it, before
// the database closes.
func startWork(data *Data, mem *memoryapi.API, logger *slog.Logger) (stop func()) {
	workCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { purgeExpired(workCtx, data, logger) })
	wg.Go(func() { expireIdle(workCtx, mem.Chats.Chats, logger) })
	wg.Go(func() {
		if err := mem.Tasks.Worker(workCtx, data.Queue); err != nil && workCtx.Err() == nil {
			logger.Error("the build worker stopped", "err", err.Error())
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// tenancy says who the callers are, for the log.
func tenancy(cfg config.Config) string {
	if len(cfg.Tokens) == 0 {
		return "single tenant " + config.LocalTenant + " (loopback only)"
	}
	return "bearer tokens"
}

// serveUntil serves on ln until ctx ends, then shuts the server down
// within shutdownTimeout; the background work stops either way.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, stopWork func(), logger *slog.Logger) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		stopWork()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "grace", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	stopWork()
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// purgeExpired drops items whose TTL has passed, as DynamoDB's TTL does,
// at start and then every purgeEvery.
func purgeExpired(ctx context.Context, data *Data, logger *slog.Logger) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		n, err := data.DB.PurgeExpired(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("purging expired items", "err", err.Error())
		case n > 0:
			logger.Info("purged expired items", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expireIdle deletes chats idle past their retention, as the hourly
// schedule does in AWS: at start and then every expireEvery.
func expireIdle(ctx context.Context, chats *lifecycle.Chats, logger *slog.Logger) {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		n, err := chats.ExpireAll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("deleting chats past their retention", "err", err.Error())
		case n > 0:
			logger.Info("deleting chats past their retention", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WithMemory opens the embedded stores in cfg.DataDir, wires the memory
// over them with the background work running (builds, purges, expiry),
// as Serve does, and calls fn with it; the work stops and the stores
// close when fn returns. The stores are one process's at a time: while a
// server holds them, opening fails with embedded.ErrLocked.
func WithMemory(ctx context.Context, cfg config.Config, logger *slog.Logger, fn func(*memoryapi.API) error) error {
	data, err := Open(cfg)
	if err != nil {
		return fmt.Errorf("opening the data directory: %w", err)
	}
	defer func() {
		if err := data.Close(); err != nil {
			logger.Error("closing the data directory", "err", err.Error())
		}
	}()
	models, err := openModels(ctx, cfg)
	if err != nil {
		return err
	}
	mem, err := memoryapi.New(cfg, data.Stores, models, logger, nil)
	if err != nil {
		return err
	}
	stop := startWork(data, mem, logger)
	defer stop()
	return fn(mem)
}

// openModels opens the compactor and the embedding model cfg names.
func openModels(ctx context.Context, cfg config.Config) (memoryapi.Models, error) {
	c, err := compactor.Open(ctx, cfg)
	if err != nil {
		return memoryapi.Models{}, err
	}
	e, err := compactor.OpenEmbedder(ctx, cfg)
	if err != nil {
		return memoryapi.Models{}, err
	}
	return memoryapi.Models{Compactor: c, Embedder: e}, nil
}
