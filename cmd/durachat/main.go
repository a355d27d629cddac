// Command durachat runs every route of every durachat function in one
// process, on embedded stores under DURACHAT_DATA: no AWS account, no
// Docker, no network.
//
//	durachat [serve]   serve the API (the default)
//	durachat import    load an export or a pi session file into a chat
//	durachat shrink    import a session file and write it again with its images as refs
//	durachat erase     erase messages of a chat through a server, with a receipt
//	durachat mcp       serve the memory to an MCP host on stdio
//	durachat help      print usage and the configuration variables
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp"
)

func main() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(local.MemoryLimit)
	}
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

const usageText = `usage: durachat [serve | import | shrink | erase | mcp | help]

serve (the default) runs the whole API locally on embedded stores.
import loads an export, a pi session file, a Codex CLI rollout or a Claude
Code session into a chat ("durachat import -h" tells how).
shrink imports a session file and writes it again with its images as refs
("durachat shrink -h" tells how).
erase erases messages of a chat through a server, with a receipt
("durachat erase -h" tells how).
mcp serves the memory to an MCP host on stdio ("durachat mcp -h" tells how).

Configuration (environment variables):
  DURACHAT_ADDR          listen address (default 127.0.0.1:8080)
  DURACHAT_DATA          data directory (default ./.durachat)
  DURACHAT_TOKENS        bearer tokens of 16 bytes or more: token1=tenantA,token2=tenantB
                         (none: one tenant "local", loopback only)
  DURACHAT_MODEL         offline | bedrock:<id> | anthropic:<model> | openai:<model>
  DURACHAT_MODEL_URL     base URL of the model API (optional)
  DURACHAT_MODEL_KEY     API key for anthropic or openai
  DURACHAT_SEARCH        on | off (default off): the search tool
  DURACHAT_PUBLIC_URL    base of image links (default http://<DURACHAT_ADDR>)
  DURACHAT_LINK_SECRET   secret signing image links (default: random per start)
  DURACHAT_LOG_LEVEL     debug | info | warn | error (default info)
  DURACHAT_COMPACTOR_URL / DURACHAT_COMPACTOR_FUNCTION   a custom compactor
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
	case cmd == "import":
		return importCmd(ctx, args[1:], lookup, stdout, os.Stderr)
	case cmd == "shrink":
		return shrinkCmd(ctx, args[1:], lookup, stdout, os.Stderr)
	case cmd == "erase":
		return eraseCmd(ctx, args[1:], lookup, stdout)
	case cmd == "mcp":
		return mcpCmd(ctx, args[1:], lookup, os.Stderr, &mcp.LineTransport{In: os.Stdin, Out: os.Stdout})
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
	// Beside the JSON log, one plain line a reader (or a script waiting
	// for the port it asked for with :0) finds whatever the log level.
	announce := func(a net.Addr) {
		fmt.Fprintf(stdout, "durachat serving on http://%s\n", a)
		if ready != nil {
			ready(a)
		}
	}
	return local.Serve(ctx, cfg, cfg.Logger(stdout), announce)
}
