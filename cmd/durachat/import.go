package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/importfile"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app/local"
	"github.com/durachat/durachat/shared/app/memoryapi"
	"github.com/durachat/durachat/shared/config"
)

const importUsage = `usage: durachat import -chat ID [-url URL [-token TOKEN] | -tenant TENANT] FILE

Loads FILE ("-" for standard input) into the chat: a durachat export
(GET /v1/chats/{chat}/export), a pi coding-agent session file, a Codex CLI
rollout or a Claude Code session (the branch a session ended on; lines
durachat does not log are counted by kind). The file is read a line at a
time, whatever its size, and sent in parts. Order and timestamps are kept,
images are stored as they go, and importing the same file again (after an
import was cut off, say) logs nothing twice. On a terminal, standard error
shows the progress.

With -url it imports through a server (-token, or DURACHAT_TOKEN, is its
bearer token); without, into the data directory DURACHAT_DATA of a local
server that is not running, as tenant -tenant (default "local").
`

// importCmd is `durachat import`.
func importCmd(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	to, file, err := importArgs("import", importUsage, args, stdout)
	if err != nil || file == "" {
		return err
	}
	src, res, err := importSource(ctx, lookup, to, file, stderr)
	if err != nil {
		return err
	}
	defer src.close()
	if _, err := fmt.Fprintln(stdout, importSummary(to.chat, res)); err != nil {
		return err
	}
	for from, to := range res.Renamed {
		// Bytes not the name's: stored under their own name, refs made to it.
		if _, err := fmt.Fprintf(stdout, "image %s is stored as %s: its bytes are not those named %s\n", from, to, from); err != nil {
			return err
		}
	}
	return nil
}

// importArgs reads the arguments of import or shrink (cmd, usage):
// -chat, where to import, and one FILE. A file of "" with no error means
// usage was asked for and written to stdout.
func importArgs(cmd, usage string, args []string, stdout io.Writer) (target, string, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	chat := fs.String("chat", "", "the chat to import into")
	url := fs.String("url", "", "a durachat server's base URL")
	token := fs.String("token", "", "the server's bearer token")
	tenant := fs.String("tenant", config.LocalTenant, "the tenant, importing into the data directory")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(stdout, usage)
		return target{}, "", err
	} else if err != nil {
		return target{}, "", usageError(err.Error() + "\n" + usage)
	}
	if *chat == "" || fs.NArg() != 1 || fs.Arg(0) == "" {
		return target{}, "", usageError(cmd + " needs -chat and one FILE\n" + usage)
	}
	// The API's rule, checked before anything is read or written: a chat
	// the API cannot name could be listed but never read or deleted.
	if err := api.CheckChat(*chat); err != nil {
		return target{}, "", usageError("-chat: " + api.AsError(err).Message)
	}
	return target{url: *url, token: *token, tenant: *tenant, chat: *chat}, fs.Arg(0), nil
}

// importSource opens file and imports it into to, showing the progress on
// stderr; the caller closes the source it returns.
func importSource(ctx context.Context, lookup func(string) (string, bool), to target, file string, stderr io.Writer) (*source, *wire.ImportResult, error) {
	src, err := openSource(file)
	if err != nil {
		return nil, nil, err
	}
	progress := newProgress(stderr, src.size)
	res, err := importTo(ctx, lookup, to, src.open, progress.report)
	progress.done()
	if err != nil {
		src.close()
		return nil, nil, err
	}
	return src, res, nil
}

// importSummary says what an import logged, and plainly when it logged
// nothing new.
func importSummary(chat string, res *wire.ImportResult) string {
	skipped := fmt.Sprintf("%d lines skipped", res.Skipped)
	if res.Skipped == 1 {
		skipped = "1 line skipped"
	}
	if len(res.SkippedByKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(res.SkippedByKind)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", res.SkippedByKind[k], k))
		}
		skipped += ": " + strings.Join(kinds, ", ")
	}
	switch {
	case res.Entries > 0 && res.New == 0:
		return fmt.Sprintf("nothing new: %s holds the file's %d messages already, as %d entries (%s)", chat, res.Messages, res.Entries, skipped)
	case res.New < res.Entries:
		return fmt.Sprintf("imported %d messages into %s as %d entries, %d of them new (%s)", res.Messages, chat, res.Entries, res.New, skipped)
	}
	return fmt.Sprintf("imported %d messages into %s as %d entries (%s)", res.Messages, chat, res.Entries, skipped)
}

// target is where an import goes: a server (url) or the data directory.
type target struct{ url, token, tenant, chat string }

// importTo imports the file open opens into the target, a line at a time.
func importTo(ctx context.Context, lookup func(string) (string, bool), to target, open func() (io.ReadCloser, error), progress func(int64)) (*wire.ImportResult, error) {
	if to.url == "" {
		return importLocal(ctx, lookup, to, open, progress)
	}
	tok := to.token
	if tok == "" {
		tok, _ = lookup("DURACHAT_TOKEN")
	}
	c, err := client.New(to.url, client.WithToken(tok))
	if err != nil {
		return nil, err
	}
	return c.Chat(to.chat).ImportFile(ctx, open, progress)
}

// localPart bounds the messages and images one local import call holds.
const localPart = 4 << 20

// importLocal imports into the local server's data directory directly,
// a part of the file at a time.
func importLocal(ctx context.Context, lookup func(string) (string, bool), to target, open func() (io.ReadCloser, error), progress func(int64)) (*wire.ImportResult, error) {
	cfg, err := config.Load(config.Serve, lookup)
	if err != nil {
		return nil, err
	}
	data, err := local.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the data directory (is the server running? import through it with -url): %w", err)
	}
	mem, err := memoryapi.New(cfg, data.Stores, memoryapi.Models{}, cfg.Logger(io.Discard), nil)
	if err != nil {
		return nil, errors.Join(err, data.Close())
	}
	total := &wire.ImportResult{}
	var part []importfile.Item
	size, end := 0, int64(0)
	flush := func() error {
		if len(part) == 0 {
			return nil
		}
		res, err := mem.Chats.Import(ctx, to.tenant, to.chat, part)
		if err != nil {
			return err
		}
		total.Add(res)
		part, size = part[:0], 0
		if progress != nil {
			progress(end)
		}
		return nil
	}
	skipped, err := importfile.Read(open, func(it importfile.Item) error {
		if it.Message != nil {
			it.Message, _ = importfile.RenameRefs(it.Message, total.Renamed)
		}
		if size > 0 && size+len(it.Message)+len(it.Image) > localPart {
			if err := flush(); err != nil {
				return err
			}
		}
		part, size, end = append(part, it), size+len(it.Message)+len(it.Image), it.End
		return nil
	})
	if err == nil {
		err = flush()
	}
	if cerr := data.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	total.Skip(skipped)
	return total, nil
}
