// Command durachat runs every route of every durachat function in one
// process, on embedded stores under DURACHAT_DATA: no AWS account, no
// Docker, no network.
//
//	durachat [serve]   serve the API (the default)
//	durachat help      print usage and the configuration variables
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
)

// Server timeouts. The longest request is a view wait, bounded well under
// API Gateway's 30 s; a 10 MB body over a slow link gets a minute.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 20 * time.Second
	purgeEvery        = time.Hour
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, nil)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "durachat:", err)
		fmt.Fprint(os.Stderr, usageText)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "durachat:", err)
		os.Exit(1)
	}
}

type usageError string

func (e usageError) Error() string { return string(e) }

const usageText = `usage: durachat [serve | help]

serve (the default) runs the whole API locally on embedded stores.

Configuration (environment variables):
  DURACHAT_ADDR          listen address (default 127.0.0.1:8080)
  DURACHAT_DATA          data directory (default ./.durachat)
  DURACHAT_TOKENS        bearer tokens: token1=tenantA,token2=tenantB
                         (none: one tenant "local", loopback only)
  DURACHAT_MODEL         offline | bedrock:<id> | anthropic:<model> | openai:<model>
  DURACHAT_MODEL_URL     base URL of the model API (optional)
  DURACHAT_MODEL_KEY     API key for anthropic or openai
  DURACHAT_SEARCH        on | off (default off): the search tool
  DURACHAT_PUBLIC_URL    base of image links (default http://<DURACHAT_ADDR>)
  DURACHAT_LINK_SECRET   secret signing image links (default: random per start)
  DURACHAT_LOG_LEVEL     debug | info | warn | error (default info)
  DURACHAT_COMPRESSOR_URL / DURACHAT_COMPRESSOR_FUNCTION   a custom compressor
`

// run is the whole program; ready, when set, is told the bound address.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer, ready func(net.Addr)) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch {
	case cmd == "serve" && len(args) <= 1:
		return serve(ctx, lookup, stdout, ready)
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		_, err := fmt.Fprint(stdout, usageText)
		return err
	}
	return usageError(fmt.Sprintf("unknown command %q", args))
}

func serve(ctx context.Context, lookup func(string) (string, bool), stdout io.Writer, ready func(net.Addr)) error {
	cfg, err := config.Load(config.Serve, lookup)
	if err != nil {
		return err
	}
	log := cfg.Logger(stdout)
	if err := local.CheckListen(cfg.Addr, len(cfg.Tokens) > 0); err != nil {
		return err
	}
	data, err := local.Open(cfg)
	if err != nil {
		return fmt.Errorf("opening the data directory: %w", err)
	}
	defer func() {
		if err := data.Close(); err != nil {
			log.Error("closing the data directory", "err", err.Error())
		}
	}()
	stores := data.Stores

	// Every route of every function, as the Lambda functions register them.
	imgs := images.New(stores.Blobs)
	routes := []api.Routes{
		hooks.NewRestore(imgs, stores.Linker), // functions/restore
		hooks.NewOffload(imgs),                // functions/offload
	}
	compressor, err := compactor.Open(ctx, cfg)
	if err != nil {
		return err
	}
	mem, err := memoryapi.New(cfg, stores, compressor, log, nil)
	if err != nil {
		return err
	}
	routes = append(routes, mem.Routes()...) // functions/memory

	h, err := app.Handler(log, local.Auth(cfg), stores, routes, data.LinkRoutes())
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Background work stops with workCtx, before the database closes.
	workCtx, stopWork := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		purgeExpired(workCtx, data, log)
	}()
	// The in-process stand-in for the compact function.
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		if err := mem.Memory.Worker(workCtx, data.Queue); err != nil && workCtx.Err() == nil {
			log.Error("the build worker stopped", "err", err.Error())
		}
	}()

	tenancy := "bearer tokens"
	if len(cfg.Tokens) == 0 {
		tenancy = "single tenant " + config.LocalTenant + " (loopback only)"
	}
	log.Info("durachat serving", "addr", ln.Addr().String(), "data", cfg.DataDir, "auth", tenancy, "model", cfg.Model.String())
	if ready != nil {
		ready(ln.Addr())
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		stopWork()
		<-done
		<-worked
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	stopWork()
	<-done
	<-worked
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	log.Info("stopped")
	return nil
}

// purgeExpired drops items whose TTL has passed, as DynamoDB's TTL does,
// at start and then every purgeEvery.
func purgeExpired(ctx context.Context, data *local.Data, log *slog.Logger) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		n, err := data.DB.PurgeExpired(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("purging expired items", "err", err.Error())
		case n > 0:
			log.Info("purged expired items", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
