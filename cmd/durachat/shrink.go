package main

import (
	"context"
	"fmt"
	"io"

	"github.com/durachat/durachat/client/importfile"
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
	to, file, err := importArgs("shrink", shrinkUsage, args, stdout)
	if err != nil || file == "" {
		return err
	}
	src, res, err := importSource(ctx, lookup, to, file, stderr)
	if err != nil {
		return err
	}
	defer src.close()
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
	_, err = fmt.Fprintf(stderr, "%s\nshrunk: %d images replaced by refs, %d bytes to %d\n", importSummary(to.chat, res), replaced, src.size, out.n)
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
