package hooks

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/refs"
)

// provider is a local server speaking one provider's API: it keeps the
// request bodies it receives and answers with a fixed reply.
type provider struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newProvider(t *testing.T, path, reply string) *provider {
	p := &provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != path {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		p.mu.Lock()
		p.bodies = append(p.bodies, body)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) last(t *testing.T) []byte {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bodies) == 0 {
		t.Fatal("the provider received no request")
	}
	return p.bodies[len(p.bodies)-1]
}

func TestAnthropicSDKRequestIsRestoredAndSent(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, b, na, nb := fixtureImages(t, e)
		params := anthropic.MessageNewParams{
			Model:     "claude-test",
			MaxTokens: 256,
			System:    []anthropic.TextBlockParam{{Text: "You see images."}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("What is in these?"), anthropic.NewTextBlock(refs.Ref(na))),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"path": "x"}, "screenshot")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", refs.Ref(nb), false)),
			},
		}
		hostRequest, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatAnthropic, "request": json.RawMessage(hostRequest)}, &got)

		var restored anthropic.MessageNewParams
		if err := json.Unmarshal(got.Request, &restored); err != nil {
			t.Fatalf("the SDK cannot read the restored request: %v\n%s", err, got.Request)
		}
		api := newProvider(t, "/v1/messages", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
			"content":[{"type":"text","text":"two pictures"}],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":10,"output_tokens":2}}`)
		client := anthropic.NewClient(anthropicoption.WithBaseURL(api.srv.URL), anthropicoption.WithAPIKey("test"), anthropicoption.WithMaxRetries(0))
		msg, err := client.Messages.New(t.Context(), restored)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != "two pictures" {
			t.Fatalf("reply %+v", msg.Content)
		}

		var sent struct {
			Model    string
			Messages []struct {
				Role    string
				Content []struct {
					Type    string
					Source  struct{ Type, MediaType, Data string }
					Content []struct {
						Type   string
						Source struct {
							Type      string
							MediaType string `json:"media_type"`
							Data      string
						}
					}
				}
			}
		}
		if err := json.Unmarshal(api.last(t), &sent); err != nil {
			t.Fatal(err)
		}
		user := sent.Messages[0].Content[1]
		result := sent.Messages[2].Content[0]
		if sent.Model != "claude-test" || user.Type != "image" || user.Source.Data != a {
			t.Fatalf("the provider did not receive image %s in the user message: %+v", na, user)
		}
		if result.Type != "tool_result" || len(result.Content) != 1 || result.Content[0].Source.Data != b || result.Content[0].Source.MediaType != "image/png" {
			t.Fatalf("the provider did not receive image %s in the tool result: %+v", nb, result)
		}
	})
}

func TestOpenAISDKRequestIsRestoredAndSent(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, _, na, nb := fixtureImages(t, e)
		params := openai.ChatCompletionNewParams{
			Model: "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("You see images."),
				openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("What is this?"),
					openai.TextContentPart(refs.Ref(na)),
				}),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "screenshot", Arguments: "{}"}},
				}}}},
				openai.ToolMessage(refs.Ref(nb), "call_1"),
			},
			Temperature: openai.Float(0.5),
		}
		hostRequest, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatOpenAI, "request": json.RawMessage(hostRequest)}, &got)
		if len(got.Unrestored) != 1 || got.Unrestored[0] != (Unrestored{Name: nb, Reason: ReasonFormat}) {
			t.Fatalf("unrestored %v, want the tool message's ref with reason format", got.Unrestored)
		}

		var restored openai.ChatCompletionNewParams
		if err := json.Unmarshal(got.Request, &restored); err != nil {
			t.Fatalf("the SDK cannot read the restored request: %v\n%s", err, got.Request)
		}
		api := newProvider(t, "/chat/completions", `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
			"choices":[{"index":0,"message":{"role":"assistant","content":"a picture"},"finish_reason":"stop"}]}`)
		client := openai.NewClient(openaioption.WithBaseURL(api.srv.URL+"/"), openaioption.WithAPIKey("test"), openaioption.WithMaxRetries(0))
		completion, err := client.Chat.Completions.New(t.Context(), restored)
		if err != nil {
			t.Fatal(err)
		}
		if completion.Choices[0].Message.Content != "a picture" {
			t.Fatalf("reply %+v", completion.Choices)
		}

		var sent struct {
			Temperature float64
			Messages    []struct {
				Role    string
				Content json.RawMessage
			}
		}
		if err := json.Unmarshal(api.last(t), &sent); err != nil {
			t.Fatal(err)
		}
		var parts []struct {
			Type     string
			ImageURL struct{ URL string } `json:"image_url"`
		}
		json.Unmarshal(sent.Messages[1].Content, &parts)
		if len(parts) != 2 || parts[1].Type != "image_url" || parts[1].ImageURL.URL != "data:image/png;base64,"+a {
			t.Fatalf("the provider did not receive the image: %s", sent.Messages[1].Content)
		}
		if !strings.Contains(string(sent.Messages[3].Content), refs.Ref(nb)) || sent.Temperature != 0.5 {
			t.Fatalf("tool message %s, temperature %v", sent.Messages[3].Content, sent.Temperature)
		}
	})
}

// TestBedrockConverseShape checks the restored body against what the AWS
// SDK itself puts on the wire for a Converse call with those images.
func TestBedrockConverseShape(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a, b, na, nb := fixtureImages(t, e)
		rawA, _ := base64.StdEncoding.DecodeString(a)
		rawB, _ := base64.StdEncoding.DecodeString(b)
		api := newProvider(t, "/model/m/converse", `{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},
			"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`)
		client := bedrockruntime.NewFromConfig(awstest.Config(), func(o *bedrockruntime.Options) { o.BaseEndpoint = aws.String(api.srv.URL) })
		converse := func(user brtypes.ContentBlock, resultContent brtypes.ToolResultContentBlock) []byte {
			_, err := client.Converse(t.Context(), &bedrockruntime.ConverseInput{
				ModelId: aws.String("m"),
				System:  []brtypes.SystemContentBlock{&brtypes.SystemContentBlockMemberText{Value: "You see images."}},
				Messages: []brtypes.Message{
					{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "What is this?"}, user}},
					{Role: brtypes.ConversationRoleAssistant, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: refs.Ref(na)}}},
					{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberToolResult{Value: brtypes.ToolResultBlock{
						ToolUseId: aws.String("t1"), Status: brtypes.ToolResultStatusSuccess,
						Content: []brtypes.ToolResultContentBlock{&brtypes.ToolResultContentBlockMemberText{Value: "shot:"}, resultContent},
					}}}},
				},
				InferenceConfig: &brtypes.InferenceConfiguration{MaxTokens: aws.Int32(64)},
			})
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Clone(api.last(t))
		}
		withRefs := converse(&brtypes.ContentBlockMemberText{Value: refs.Ref(na)}, &brtypes.ToolResultContentBlockMemberText{Value: refs.Ref(nb)})
		withImages := converse(
			&brtypes.ContentBlockMemberImage{Value: brtypes.ImageBlock{Format: brtypes.ImageFormatPng, Source: &brtypes.ImageSourceMemberBytes{Value: rawA}}},
			&brtypes.ToolResultContentBlockMemberImage{Value: brtypes.ImageBlock{Format: brtypes.ImageFormatPng, Source: &brtypes.ImageSourceMemberBytes{Value: rawB}}},
		)
		var got restoreAnswerT
		e.postOK(t, tenantA, "hooks/before-request", obj{"format": FormatBedrock, "request": json.RawMessage(withRefs)}, &got)
		if !jsonEqual(t, got.Request, withImages) {
			t.Fatalf("restored Converse body differs from the SDK's:\n got %s\nwant %s", got.Request, withImages)
		}
	})
}
