package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
)

const eraseUsage = `usage: durachat erase -chat ID -url URL [-token TOKEN] (-seq N[,N...] | -match TEXT | -image NAME[,NAME...])
       durachat erase -chat ID -url URL [-token TOKEN] -receipt ERASURE

Erases messages of the chat through a server: those with the seqs given (as
read back), every message whose text or image description holds TEXT
literally (at least 4 characters), or every message showing the images
named. Each becomes a tombstone in its place; the summary lines built from
it are hidden at once and rebuilt; its images are deleted unless a live
message of the tenant names them. Prints the erasure's receipt as JSON.
-receipt prints the receipt of an earlier erasure. -token, or
DURACHAT_TOKEN, is the server's bearer token.
`

// eraseArgs are the flags of durachat erase.
type eraseArgs struct {
	chat, url, token             string
	seqs, match, images, receipt string
}

// eraseCmd is `durachat erase`.
func eraseCmd(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("erase", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a eraseArgs
	fs.StringVar(&a.chat, "chat", "", "the chat to erase from")
	fs.StringVar(&a.url, "url", "", "a durachat server's base URL")
	fs.StringVar(&a.token, "token", "", "the server's bearer token")
	fs.StringVar(&a.seqs, "seq", "", "the seqs of the messages to erase, comma separated")
	fs.StringVar(&a.match, "match", "", "erase every message holding this text")
	fs.StringVar(&a.images, "image", "", "erase every message showing these images, comma separated")
	fs.StringVar(&a.receipt, "receipt", "", "print the receipt of this erasure")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(stdout, eraseUsage)
		return err
	} else if err != nil {
		return usageError(err.Error() + "\n" + eraseUsage)
	}
	if a.chat == "" || a.url == "" || fs.NArg() != 0 {
		return usageError("erase needs -chat and -url\n" + eraseUsage)
	}
	if err := api.CheckChat(a.chat); err != nil {
		return usageError("-chat: " + api.AsError(err).Message)
	}
	req, err := a.request()
	if err != nil {
		return err
	}
	tok := a.token
	if tok == "" {
		tok, _ = lookup("DURACHAT_TOKEN")
	}
	c, err := client.New(a.url, client.WithToken(tok))
	if err != nil {
		return err
	}
	var out *wire.Erasure
	if a.receipt != "" {
		out, err = c.Chat(a.chat).Erasure(ctx, a.receipt)
	} else {
		out, err = c.Chat(a.chat).Erase(ctx, req)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// request is the erase request the flags ask for; exactly one of -seq,
// -match, -image and -receipt is given.
func (a eraseArgs) request() (wire.EraseRequest, error) {
	var req wire.EraseRequest
	given := 0
	for _, f := range []string{a.seqs, a.match, a.images, a.receipt} {
		if f != "" {
			given++
		}
	}
	if given != 1 {
		return req, usageError("erase needs one of -seq, -match, -image or -receipt\n" + eraseUsage)
	}
	if a.seqs != "" {
		for _, s := range strings.Split(a.seqs, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return req, usageError(fmt.Sprintf("-seq: %q is not a seq\n%s", s, eraseUsage))
			}
			req.Seqs = append(req.Seqs, n)
		}
	}
	req.Match = a.match
	if a.images != "" {
		req.Images = strings.Split(a.images, ",")
	}
	return req, nil
}
