package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/config"
)

const shrinkUsage = `usage: durachat shrink -chat ID [-url URL [-token TOKEN] | -tenant TENANT] FILE

Imports FILE into the chat as durachat import does (storing its images),
then writes FILE again on standard output in its own host's format, every
line kept, every inline image replaced by its ref "[image <name>]": a pi
session file, a Codex CLI rollout or a Claude Code session, a fraction of
its size. The host resumes from it: pi through durachat's extension, which
restores each ref to its image; Codex and Claude Code send a ref to the
model as the text it is, which the model can look at through durachat's
tools. What the import did is said on standard error.
`

// shrinkCmd is `durachat shrink`.
func shrinkCmd(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shrink", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	chat := fs.String("chat", "", "the chat to import into")
	url := fs.String("url", "", "a durachat server's base URL")
	token := fs.String("token", "", "the server's bearer token")
	tenant := fs.String("tenant", config.LocalTenant, "the tenant, importing into the data directory")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(stdout, shrinkUsage)
		return err
	} else if err != nil {
		return usageError(err.Error() + "\n" + shrinkUsage)
	}
	if *chat == "" || fs.NArg() != 1 {
		return usageError("shrink needs -chat and one FILE\n" + shrinkUsage)
	}
	if err := api.CheckChat(*chat); err != nil {
		return usageError("-chat: " + api.AsError(err).Message)
	}
	src, err := openSource(fs.Arg(0))
	if err != nil {
		return err
	}
	defer src.close()
	progress := newProgress(stderr, src.size)
	res, err := importTo(ctx, lookup, target{url: *url, token: *token, tenant: *tenant, chat: *chat}, src.open, progress.report)
	progress.done()
	if err != nil {
		return err
	}
	if len(res.Renamed) > 0 {
		// Not so for an inline image, whose name is its bytes'.
		return fmt.Errorf("the import stored %d images under other names than their refs would name; import the file and export the chat instead", len(res.Renamed))
	}
	in, err := src.open()
	if err != nil {
		return err
	}
	defer in.Close()
	out := &countingWriter{w: stdout}
	replaced, err := importfile.Shrink(in, out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stderr, "%s\nshrunk: %d images replaced by refs, %d bytes to %d\n", importSummary(*chat, res), replaced, src.size, out.n)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
