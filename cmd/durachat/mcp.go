package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP command's own variables: the chat it serves, and a durachat API
// to serve instead of the embedded stores.
const (
	envChat  = "DURACHAT_CHAT"
	envURL   = "DURACHAT_URL"
	envToken = "DURACHAT_TOKEN"
)

const mcpUsage = `usage: durachat mcp [-chat id] [-url URL -token TOKEN]

mcp serves the memory to an MCP host on stdin and stdout. Without -url it
opens the same embedded stores as serve (DURACHAT_DATA; not while a server
holds them) as the tenant "local"; with -url it serves that durachat API
(a deployed stack, or a running server) with the bearer token.
Flags fall back to DURACHAT_CHAT, DURACHAT_URL and DURACHAT_TOKEN.
`

// mcpCmd serves one MCP session on t until it ends or ctx does.
func mcpCmd(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer, t sdk.Transport) error {
	env := func(k string) string { v, _ := lookup(k); return v }
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, mcpUsage) }
	chat := fs.String("chat", env(envChat), "the one chat to serve (empty: each call names its chat)")
	url := fs.String("url", env(envURL), "a durachat API to serve instead of the embedded stores")
	token := fs.String("token", env(envToken), "the bearer token for -url")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	cfg, err := config.Load(config.Serve, lookup)
	if err != nil {
		return err
	}
	// stdout is the protocol's: the logs go to stderr.
	logger := cfg.Logger(stderr)
	serve := func(mem mcp.Memory, optIn bool) error {
		s, err := mcp.NewServer(mem, mcp.Options{Chat: *chat, OptIn: optIn})
		if err != nil {
			return err
		}
		logger.Info("durachat mcp serving on stdio", "chat", *chat, "url", *url)
		return s.Run(ctx, t)
	}
	if *url != "" {
		c, err := client.New(*url, client.WithToken(*token))
		if err != nil {
			return err
		}
		return serve(mcp.Remote(c), true)
	}
	return local.WithMemory(ctx, cfg, logger, func(a *memoryapi.API) error {
		return serve(a.MCP(config.LocalTenant), true)
	})
}
