package mcp

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/durachat/durachat/client"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/transcript"
)

// Remote is the Memory of a durachat API (a deployed stack, or a local
// server) that c calls with its token: the MCP server on stdio for a
// stack it reaches over HTTP.
func Remote(c *client.Client) Memory { return remote{c} }

type remote struct{ c *client.Client }

// asFault is an API error as the error the server answered, so the tool
// error carries its code; an error that is not the API's (the network) is
// an outage.
func asFault(err error) error {
	if err == nil {
		return nil
	}
	if ce, ok := errors.AsType[*client.Error](err); ok {
		return &fault.Error{Code: ce.Code, Message: ce.Message, Field: ce.Field}
	}
	return api.Unavailable(err)
}

func result(r *client.ToolResult, err error) (wire.ToolResult, error) {
	if err != nil {
		return wire.ToolResult{}, asFault(err)
	}
	return *r, nil
}

func (r remote) View(ctx context.Context, chat string, wait bool) (wire.View, error) {
	w := client.NoWait
	if wait {
		w = client.WaitTurn
	}
	v, err := r.c.Chat(chat).View(ctx, w)
	if err != nil {
		return wire.View{}, asFault(err)
	}
	return *v, nil
}

func (r remote) CallTool(ctx context.Context, chat, name string, args json.RawMessage) (wire.ToolResult, error) {
	return result(r.c.Chat(chat).CallTool(ctx, name, args))
}

// Settings are read from the chat's tool list: an opt-in tool is listed
// while it is on.
func (r remote) Settings(ctx context.Context, chat string) (memory.Settings, error) {
	tools, err := r.c.Chat(chat).Tools(ctx)
	if err != nil {
		return memory.Settings{}, asFault(err)
	}
	var s memory.Settings
	for _, t := range tools {
		switch t.Name {
		case client.ToolSearch:
			s.Search = true
		case client.ToolForget:
			s.Forget = true
		}
	}
	return s, nil
}

func (r remote) Log(ctx context.Context, chat string, req transcript.AppendRequest) ([]int64, error) {
	msgs := make([]any, len(req.Messages))
	for i, m := range req.Messages {
		// As the host sent it, every field kept.
		msgs[i] = m
		if m.Raw != nil {
			msgs[i] = m.Raw
		}
	}
	ids, err := r.c.Chat(chat).Append(ctx, req.Receipt, msgs...)
	return ids, asFault(err)
}

func (r remote) Image(ctx context.Context, chat, name string) ([]byte, string, error) {
	data, mime, err := r.c.Chat(chat).Image(ctx, name)
	return data, mime, asFault(err)
}
