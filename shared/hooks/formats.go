package hooks

import (
	"strings"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
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
	// parse walks req; a body not of this provider's shape is a 400 naming
	// the field.
	parse(req rawjson.Value) (w *walk, build func() (rawjson.Value, error), err error)
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

// countImages is an other func that counts blocks of an image type.
func countImages(w *walk, imageType string) func(*rawjson.Object, string, string, *rawjson.List, int) error {
	return func(_ *rawjson.Object, typ, _ string, _ *rawjson.List, _ int) error {
		if typ == imageType {
			w.images++
		}
		return nil
	}
}

// pi-ai: a Context {"systemPrompt", "messages", "tools"}; refs are restored
// in user and toolResult messages as {"type": "image", "data", "mimeType",
// "name"}, name being the stored image's name, so that offloading the
// message again finds the same key.
type piFormat struct{}

func (piFormat) urls() bool { return false }

func (piFormat) maxImages() int { return MaxImagesPi }

func (piFormat) parse(req rawjson.Value) (*walk, func() (rawjson.Value, error), error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user", "toolResult":
			return w.typedContent(msg.Fields["content"], path+".content", true, "text", piImage, countImages(w, "image"), set(msg, "content"))
		default:
			return badRole(path, role, "user, assistant or toolResult")
		}
	})
}

func piImage(p picture, text *rawjson.Object) rawjson.Node {
	b := rawjson.NewObject(map[string]rawjson.Node{
		"type":     rawjson.String("image"),
		"data":     rawjson.Quoted{p.b64},
		"mimeType": rawjson.Quoted{p.mimeType},
		"name":     rawjson.Quoted{p.name},
	})
	if text != nil {
		// The ref block's other fields were the image block's (offload
		// keeps them); they go back onto the image.
		for k, v := range text.Fields {
			if _, ok := b.Fields[k]; !ok && k != "text" {
				b.Fields[k] = v
			}
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

func (anthropicFormat) parse(req rawjson.Value) (*walk, func() (rawjson.Value, error), error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user":
		default:
			return badRole(path, role, "user or assistant")
		}
		other := func(b *rawjson.Object, typ, bpath string, l *rawjson.List, j int) error {
			switch typ {
			case "image":
				w.images++
			case "tool_result":
				if err := w.typedContent(b.Fields["content"], bpath+".content", true, "text", anthropicImage, countImages(w, "image"), set(b, "content")); err != nil {
					return err
				}
				w.commitObject(b, func(v rawjson.Node) { l.Set(j, v) })
			}
			return nil
		}
		return w.typedContent(msg.Fields["content"], path+".content", true, "text", anthropicImage, other, set(msg, "content"))
	})
}

func anthropicImage(p picture, text *rawjson.Object) rawjson.Node {
	source := rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("url"), "url": rawjson.String(p.url)})
	if p.url == "" {
		source = rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("base64"), "media_type": rawjson.Quoted{p.mimeType}, "data": rawjson.Quoted{p.b64}})
	}
	b := rawjson.NewObject(map[string]rawjson.Node{"type": rawjson.String("image"), "source": source})
	if text != nil {
		if cc, ok := text.Fields["cache_control"]; ok {
			b.Fields["cache_control"] = cc
		}
	}
	return b
}

// OpenAI Chat Completions: refs are restored in user messages as
// {"type": "image_url", "image_url": {"url": data URL or link}}. Tool
// messages take text only: a ref there stays text (reason "format").
type openAIFormat struct{}

func (openAIFormat) urls() bool { return true }

func (openAIFormat) maxImages() int { return MaxImagesOpenAI }

func (openAIFormat) parse(req rawjson.Value) (*walk, func() (rawjson.Value, error), error) {
	return walkMessages(req, func(w *walk, msg *rawjson.Object, path, role string) error {
		switch role {
		case "system", "developer", "assistant":
			return nil
		case "user":
			return w.typedContent(msg.Fields["content"], path+".content", true, "text", openAIImage, countImages(w, "image_url"), set(msg, "content"))
		case "tool", "function":
			return w.typedContent(msg.Fields["content"], path+".content", false, "text", openAIImage, ignoreOthers, set(msg, "content"))
		default:
			return badRole(path, role, "system, developer, user, assistant, tool or function")
		}
	})
}

func openAIImage(p picture, _ *rawjson.Object) rawjson.Node {
	var url rawjson.Node = rawjson.String(p.url)
	if p.url == "" {
		url = rawjson.Quoted{"data:", p.mimeType, ";base64,", p.b64}
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

func (bedrockFormat) parse(req rawjson.Value) (*walk, func() (rawjson.Value, error), error) {
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
func (w *walk) bedrockContent(raw rawjson.Value, path string, setContent func(rawjson.Node), outer bool) error {
	l, err := parseList(raw, path)
	if err != nil {
		return err
	}
	for j := range l.Items {
		bpath := index(path, j)
		b, err := parseObject(l.Items[j], bpath)
		if err != nil {
			return err
		}
		if t, ok := b.Fields["text"]; ok {
			text, ok := t.Text()
			if !ok {
				return api.BadRequest(bpath+".text", "%s.text must be a string", bpath)
			}
			if name := refs.RefName(text); name != "" {
				w.slots = append(w.slots, &slot{name: name, canImage: true, fill: func(p picture) error {
					l.Set(j, bedrockImage(p))
					return nil
				}, text: setText(l, j)})
			}
			continue
		}
		if _, ok := b.Fields["image"]; ok {
			w.images++
			continue
		}
		if tr, ok := b.Fields["toolResult"]; ok && outer {
			trPath := bpath + ".toolResult"
			result, err := parseObject(tr, trPath)
			if err != nil {
				return err
			}
			if c, ok := result.Fields["content"]; ok && !c.IsNull() {
				if err := w.bedrockContent(c, trPath+".content", set(result, "content"), false); err != nil {
					return err
				}
			}
			w.commitObject(result, set(b, "toolResult"))
			w.commitObject(b, func(v rawjson.Node) { l.Set(j, v) })
		}
	}
	w.commitList(l, setContent)
	return nil
}

// bedrockImage is a Converse image block; its format is the MIME subtype.
func bedrockImage(p picture) rawjson.Node {
	return rawjson.NewObject(map[string]rawjson.Node{"image": rawjson.NewObject(map[string]rawjson.Node{
		"format": rawjson.Quoted{strings.TrimPrefix(p.mimeType, "image/")},
		"source": rawjson.NewObject(map[string]rawjson.Node{"bytes": rawjson.Quoted{p.b64}}),
	})})
}
