package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
)

// The chat settings that offer the opt-in tools (PUT .../memory/settings).
const (
	SettingSearch = "search"
	SettingForget = "forget"
)

// Settings are a chat's opt-in tools, on or off.
type Settings struct {
	Search bool `json:"search"`
	Forget bool `json:"forget"`
}

// On reports whether the opt-in setting name is on ("" is always on).
func (s Settings) On(name string) bool {
	switch name {
	case "":
		return true
	case SettingSearch:
		return s.Search
	case SettingForget:
		return s.Forget
	}
	return false
}

// AllOn are the settings with every opt-in tool on.
var AllOn = Settings{Search: true, Forget: true}

// OffError is a call of an opt-in tool whose setting is off for the chat.
type OffError struct{ Setting string }

func (e *OffError) Error() string { return "the " + e.Setting + " tool is off for this chat" }

// Message says how to turn the tool on.
func (e *OffError) Message() string {
	how := " for this chat; turn it on with PUT /v1/chats/{chat}/memory/settings and the body {\"" + e.Setting + "\": true}"
	if e.Setting == SettingSearch {
		how += ", or for every chat in the server's configuration"
	}
	return "the " + e.Setting + " tool is off" + how
}

// ErrSearchOff is returned by Search when the chat has no search tool.
var ErrSearchOff error = &OffError{Setting: SettingSearch}

// ErrForgetOff is returned by the forget tool when the chat has it off.
var ErrForgetOff error = &OffError{Setting: SettingForget}

// Forgetter erases messages of a chat as POST .../erase does
// (lifecycle.Routes.Forget): the one erasure, asked by the model.
type Forgetter interface {
	Forget(ctx context.Context, c chatid.Chat, a wire.ForgetArgs) (wire.Erasure, error)
}

// ForgetFunc is a func as a Forgetter.
type ForgetFunc func(ctx context.Context, c chatid.Chat, a wire.ForgetArgs) (wire.Erasure, error)

// Forget calls f.
func (f ForgetFunc) Forget(ctx context.Context, c chatid.Chat, a wire.ForgetArgs) (wire.Erasure, error) {
	return f(ctx, c, a)
}

// settings are the opt-in settings of the chat whose state is st.
func (m *Memory) settings(st *chatState) Settings {
	return Settings{Search: m.searchOn(st), Forget: st.Forget != nil && *st.Forget}
}

// chatSettings are the opt-in settings of the incarnation c.
func (m *Memory) chatSettings(ctx context.Context, c chatid.Chat) (Settings, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return Settings{}, err
	}
	return m.settings(st), nil
}

// Settings are a chat's opt-in settings.
func (m *Memory) Settings(ctx context.Context, tenant, chat string) (Settings, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return Settings{}, err
	}
	return m.chatSettings(ctx, c)
}

// forget answers the forget tool: the chat's erasure of the messages a
// names, its receipt in words. A bad argument is an error result the
// model can read; the erased words appear nowhere in the answer.
func (m *Memory) forget(ctx context.Context, c chatid.Chat, a wire.ForgetArgs) (wire.ToolResult, error) {
	s, err := m.chatSettings(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if !s.Forget || m.forgetter == nil {
		return wire.ToolResult{}, ErrForgetOff
	}
	e, err := m.forgetter.Forget(ctx, c, a)
	var f *fault.Error
	if errors.As(err, &f) && f.Code == fault.BadRequest {
		return toolError("forget: %s", f.Message), nil
	}
	if err != nil {
		return wire.ToolResult{}, err
	}
	return textResult(forgetReceipt(e)), nil
}

// forgetReceipt is an erasure's receipt in words.
func forgetReceipt(e wire.Erasure) string {
	switch {
	case e.Refused != "":
		return fmt.Sprintf("erasure %s: forgot nothing: %s", e.Erasure, e.Refused)
	case !e.Done && len(e.Messages) == 0:
		return fmt.Sprintf("erasure %s: the chat is large, so the messages holding the text are being looked for in the background; they are forgotten once found", e.Erasure)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "erasure %s: forgot %d message(s)", e.Erasure, len(e.Messages))
	for k, msg := range e.Messages {
		sep := ", "
		if k == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%sentries %s", sep, span(msg.Entries))
	}
	if len(e.Messages) > 0 {
		b.WriteString(")")
	}
	b.WriteString("; their words are gone from the log and each now reads as \"(erased <time>)\"")
	fmt.Fprintf(&b, "; %d summary line(s) taken back, %d rebuilt", len(e.Nodes), e.Rebuilt)
	if len(e.ImagesDeleted) > 0 || e.ImagesKept > 0 {
		fmt.Fprintf(&b, "; %d image(s) deleted, %d kept (still shown by another message)", len(e.ImagesDeleted), e.ImagesKept)
	}
	if e.Done {
		b.WriteString(". Done.")
	} else {
		b.WriteString(". The rest runs on: the summaries are rebuilt without the erased words.")
	}
	return b.String()
}

// span is entry ids first..last as "a" or "a-b".
func span(ids []int64) string {
	if len(ids) == 1 {
		return fmt.Sprint(ids[0])
	}
	return fmt.Sprintf("%d-%d", ids[0], ids[len(ids)-1])
}
