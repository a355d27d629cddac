package imagefacts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
)

// Question is asked about each conversation's image, followed by the
// image's ref block as the host keeps it.
const Question = "Earlier in this conversation the user sent the image below. What does it show? Answer in one sentence, with every name and number it shows."

// AskSetup is one arm of the question: how a model gets to know an image
// the conversation sent, when it is asked about it later.
type AskSetup struct {
	// Name labels the arm in the table.
	Name string
	// Blobs hold the images and descriptions a Run stored.
	Blobs  store.Blobs
	Tenant string // "eval" when empty
	Model  model.Model
	// Mode is the before-request mode the question goes through
	// (hooks.ModeInline, hooks.ModeDescribe); empty sends the ref as it is,
	// as a host without durachat's restore would.
	Mode          string
	Facts         []Fact
	Conversations []Conversation
}

// Answers is one arm's measurement.
type Answers struct {
	Name          string
	Conversations int
	// Answered counts the answers that state the image's fact; Pending the
	// questions whose image had no description (mode describe).
	Answered int
	Pending  int
	Misses   []Miss
}

// Ask asks s.Model about each conversation's image in an Anthropic
// Messages request holding Question and the image's ref, passed through
// the real before-request route in s.Mode, and grades each answer by the
// fact, as Run grades lines.
func Ask(ctx context.Context, s AskSetup) (Answers, error) {
	tenant := s.Tenant
	if tenant == "" {
		tenant = "eval"
	}
	mux := http.NewServeMux()
	hooks.NewRestore(images.New(s.Blobs), nil).Register(mux)
	res := Answers{Name: s.Name, Conversations: len(s.Conversations)}
	for _, c := range s.Conversations {
		name, err := imageOf(c)
		if err != nil {
			return Answers{}, err
		}
		req := map[string]any{"model": s.Model.Name(), "max_tokens": 256, "messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": Question},
				map[string]any{"type": "text", "text": refs.Ref(name)},
			}},
		}}
		body, err := json.Marshal(req)
		if err != nil {
			return Answers{}, err
		}
		if s.Mode != "" {
			var pending int
			if body, pending, err = beforeRequest(ctx, mux, tenant, s.Mode, body); err != nil {
				return Answers{}, fmt.Errorf("imagefacts: %s: %w", c.Chat, err)
			}
			res.Pending += pending
		}
		mreq, err := modelRequest(body)
		if err != nil {
			return Answers{}, fmt.Errorf("imagefacts: %s: %w", c.Chat, err)
		}
		resp, err := s.Model.Complete(ctx, mreq)
		if err != nil {
			return Answers{}, fmt.Errorf("imagefacts: asking about %s: %w", c.Chat, err)
		}
		want := s.Facts[c.Fact].Fact
		if Contains(resp.Text, want) {
			res.Answered++
		} else {
			res.Misses = append(res.Misses, Miss{Chat: c.Chat, Node: "answer", Fact: want, Line: resp.Text})
		}
	}
	return res, nil
}

// imageOf is the stored name of the image conversation c sends.
func imageOf(c Conversation) (string, error) {
	if c.Slot < len(c.Messages) {
		for _, b := range c.Messages[c.Slot].Content.Blocks {
			if b.Type == pi.TypeImage {
				return images.Name(b.Data), nil
			}
		}
	}
	return "", fmt.Errorf("imagefacts: %s has no image at entry %d", c.Chat, c.Slot)
}

// beforeRequest passes an Anthropic request through the before-request
// route as tenant, returning the request it answers and its count of
// pending descriptions.
func beforeRequest(ctx context.Context, mux http.Handler, tenant, mode string, req []byte) ([]byte, int, error) {
	body, err := json.Marshal(map[string]any{"format": hooks.FormatAnthropic, "mode": mode, "request": json.RawMessage(req)})
	if err != nil {
		return nil, 0, err
	}
	r := httptest.NewRequestWithContext(api.WithTenant(ctx, tenant), http.MethodPost, "/v1/chats/ask/hooks/before-request", strings.NewReader(string(body)))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return nil, 0, fmt.Errorf("before-request: status %d: %s", w.Code, w.Body.String())
	}
	var answer struct {
		Request             json.RawMessage `json:"request"`
		PendingDescriptions int             `json:"pendingDescriptions"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
		return nil, 0, fmt.Errorf("before-request answer: %w", err)
	}
	return answer.Request, answer.PendingDescriptions, nil
}

// modelRequest reads the one user message of an Anthropic request as a
// model request: text blocks, and base64 image blocks.
func modelRequest(body []byte) (model.Request, error) {
	var req struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Source *struct {
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return model.Request{}, err
	}
	out := model.Request{MaxTokens: req.MaxTokens}
	for _, m := range req.Messages {
		msg := model.Message{Role: m.Role}
		for _, b := range m.Content {
			switch {
			case b.Type == "text":
				msg.Parts = append(msg.Parts, model.Part{Text: b.Text})
			case b.Type == "image" && b.Source != nil:
				data, err := base64.StdEncoding.DecodeString(b.Source.Data)
				if err != nil {
					return model.Request{}, err
				}
				msg.Parts = append(msg.Parts, model.Part{Image: &model.Image{MimeType: b.Source.MediaType, Data: data}})
			default:
				return model.Request{}, errors.New("an unexpected block of type " + b.Type)
			}
		}
		out.Messages = append(out.Messages, msg)
	}
	return out, nil
}

// AnswerTable is the question's measurement as a Markdown table, one row
// per arm.
func AnswerTable(results ...Answers) string {
	var b strings.Builder
	b.WriteString("| Arm | Questions answered with the image's fact | Images without a description |\n")
	b.WriteString("|---|---|---|\n")
	for _, r := range results {
		share := 0.0
		if r.Conversations > 0 {
			share = float64(r.Answered) / float64(r.Conversations)
		}
		fmt.Fprintf(&b, "| %s | %.0f%% (%d/%d) | %d |\n", r.Name, 100*share, r.Answered, r.Conversations, r.Pending)
	}
	return b.String()
}
