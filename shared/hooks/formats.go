package hooks

import (
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
)

// Request formats before-request accepts.
const (
	FormatPi        = "pi"
	FormatAnthropic = "anthropic"
	FormatBedrock   = "bedrock"
	FormatOpenAI    = "openai"
)

// format parses one provider's request body into a walk: the ref blocks in
// its user messages and tool results, and how to put images there.
type format interface {
	// parse walks req, a slice of a body checked valid; a body not of this
	// provider's shape is a 400 naming the field.
	parse(req rawjson.Value) (w *walk, build func() rawjson.Node, err error)
	// urls tells whether the format's image blocks can carry a URL.
	urls() bool
	// maxImages is the most images the provider takes in one request.
	maxImages() int
}

// The most images a provider takes in one request, as each documents it.
// pi-ai sends to any of them, so a pi request gets the least.
const (
	MaxImagesAnthropic = 100
	MaxImagesBedrock   = 20
	MaxImagesOpenAI    = 500
	MaxImagesPi        = min(MaxImagesAnthropic, MaxImagesBedrock, MaxImagesOpenAI)
)

func formatOf(name string) (format, bool) {
	switch name {
	case FormatPi:
		return piFormat{}, true
	case FormatAnthropic:
		return anthropicFormat{}, true
	case FormatBedrock:
		return bedrockFormat{}, true
	case FormatOpenAI:
		return openAIFormat{}, true
	}
	return nil, false
}

func set(o *rawjson.Object, key string) func(rawjson.Node) {
	return func(v rawjson.Node) { o.Set(key, v) }
}

// badRole is the 400 for a message role the format does not have; roles
// lists the ones it does, as a sentence.
func badRole(path, role, roles string) error {
	return api.BadRequest(path+".role", "%s.role %q is not %s", path, role, roles)
}

// pi-ai: a Context {"systemPrompt", "messages", "tools"}; refs are restored
// in user and toolResult messages as {"type": "image", "data", "mimeType",
// "name"}, name being the stored image's name, so that offloading the
// message again finds the same key.
type piFormat struct{}

func (piFormat) urls() bool { return false }

func (piFormat) maxImages() int { return MaxImagesPi }

var piRule = contentRule{canImage: true, image: piImage, imageType: "image"}

func (piFormat) parse(req rawjson.Value) (*walk, func() rawjson.Node, error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user", "toolResult":
			return w.typedContent(msg.Fields["content"], path+".content", piRule, set(msg, "content"))
		default:
			return badRole(path, role, "user, assistant or toolResult")
		}
	})
}

func piImage(p picture, ref block) rawjson.Node {
	b := rawjson.NewObject(map[string]rawjson.Node{
		"type":     rawjson.String("image"),
		"data":     p.base64(""),
		"mimeType": rawjson.Quoted{p.mimeType},
		"name":     rawjson.Quoted{p.name},
	})
	// The ref block's other fields were the image block's (offload keeps
	// them); they go back onto the image.
	for _, f := range ref.fields {
		if _, ok := b.Fields[f.key]; !ok && f.key != "text" {
			b.Fields[f.key] = f.value
		}
	}
	return b
}

// Anthropic Messages: refs are restored in user messages, directly or inside
// tool_result blocks, as {"type": "image", "source": {"type": "base64" |
// "url", ...}}. A cache breakpoint on the ref block stays on the image.
type anthropicFormat struct{}

func (anthropicFormat) urls() bool { return true }

func (anthropicFormat) maxImages() int { return MaxImagesAnthropic }

var anthropicRule = contentRule{canImage: true, image: anthropicImage, imageType: "image", toolResults: true}

func (anthropicFormat) parse(req rawjson.Value) (*walk, func() rawjson.Node, error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user":
			return w.typedContent(msg.Fields["content"], path+".content", anthropicRule, set(msg, "content"))
		default:
			return badRole(path, role, "user or assistant")
		}
	})
}

func anthropicImage(p picture, ref block) rawjson.Node {
	var source *rawjson.Object
	if p.url == "" {
		source = rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("base64"), "media_type": rawjson.Quoted{p.mimeType}, "data": p.base64("")})
	} else {
		source = rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("url"), "url": rawjson.String(p.url)})
	}
	b := rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("image"), "source": source})
	if cc, ok := ref.get("cache_control"); ok {
		b.Fields["cache_control"] = cc
	}
	return b
}

// OpenAI Chat Completions: refs are restored in user messages as
// {"type": "image_url", "image_url": {"url": data URL or link}}. Tool
// messages take text only: a ref there stays text (reason "format").
type openAIFormat struct{}

func (openAIFormat) urls() bool { return true }

func (openAIFormat) maxImages() int { return MaxImagesOpenAI }

var (
	openAIUserRule = contentRule{canImage: true, image: openAIImage, imageType: "image_url"}
	openAIToolRule = contentRule{image: openAIImage}
)

func (openAIFormat) parse(req rawjson.Value) (*walk, func() rawjson.Node, error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "system", "developer", "assistant":
			return nil
		case "user":
			return w.typedContent(msg.Fields["content"], path+".content", openAIUserRule, set(msg, "content"))
		case "tool", "function":
			return w.typedContent(msg.Fields["content"], path+".content", openAIToolRule, set(msg, "content"))
		default:
			return badRole(path, role, "system, developer, user, assistant, tool or function")
		}
	})
}

func openAIImage(p picture, _ block) rawjson.Node {
	var url rawjson.Node = rawjson.String(p.url)
	if p.url == "" {
		url = p.base64("data:" + p.mimeType + ";base64,")
	}
	return rawjson.NewObject(map[string]rawjson.Node{
		"type":      rawjson.String("image_url"),
		"image_url": rawjson.NewObject(map[string]rawjson.Node{"url": url}),
	})
}

// Bedrock Converse: content blocks are unions keyed by their one field:
// {"text"}, {"image": {"format", "source": {"bytes": base64}}},
// {"toolResult": {"toolUseId", "content": [...], "status"}}. Refs are
// restored in user messages and the tool results they carry. Converse takes
// images by bytes or from an S3 location, not by link, so past the budget a
// ref stays text.
type bedrockFormat struct{}

func (bedrockFormat) urls() bool { return false }

func (bedrockFormat) maxImages() int { return MaxImagesBedrock }

func (bedrockFormat) parse(req rawjson.Value) (*walk, func() rawjson.Node, error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user":
		default:
			return badRole(path, role, "user or assistant")
		}
		raw, ok := msg.Fields["content"]
		if !ok || raw.IsNull() {
			return api.BadRequest(path+".content", "%s.content is required", path)
		}
		return w.bedrockContent(raw, path+".content", set(msg, "content"), true)
	})
}

// bedrockContent walks a list of Converse content blocks; outer is false
// inside a tool result, where another tool result cannot be.
func (w *walk) bedrockContent(raw rawjson.Value, path string, put func(rawjson.Node), outer bool) error {
	l, err := parseList(raw, path)
	if err != nil {
		return err
	}
	err = eachBlock(l, path, func(j int, b block) error {
		if t, ok := b.get("text"); ok {
			if !isText(t) {
				return fieldError(index(path, j), "text", true)
			}
			if name := refIn(t); name != "" {
				w.add(slot{name: name, canImage: true, list: l, index: j, image: bedrockImage}, !outer)
			}
			return nil
		}
		if _, ok := b.get("image"); ok {
			w.images++
			return nil
		}
		if tr, ok := b.get("toolResult"); ok && outer {
			return w.bedrockToolResult(tr, index(path, j)+".toolResult", b, func(v rawjson.Node) { l.Set(j, v) })
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.commitList(l, put)
	return nil
}

// bedrockToolResult walks the tool result tr of block b, at path; put
// writes b back when the result changed.
func (w *walk) bedrockToolResult(tr rawjson.Value, path string, b block, put func(rawjson.Node)) error {
	result, err := parseObject(tr, path)
	if err != nil {
		return err
	}
	if c, ok := result.Fields["content"]; ok && !c.IsNull() {
		if err := w.bedrockContent(c, path+".content", set(result, "content"), false); err != nil {
			return err
		}
	}
	o := b.object()
	w.commitObject(result, set(o, "toolResult"))
	w.commitObject(o, put)
	return nil
}

// bedrockImage is a Converse image block; its format is the MIME subtype.
func bedrockImage(p picture, _ block) rawjson.Node {
	return rawjson.NewObject(map[string]rawjson.Node{"image": rawjson.NewObject(map[string]rawjson.Node{
		"format": rawjson.Quoted{strings.TrimPrefix(p.mimeType, "image/")},
		"source": rawjson.NewObject(map[string]rawjson.Node{"bytes": p.base64("")}),
	})})
}
