package hooks

import (
	"encoding/json"
	"strings"

	"github.com/durachat/durachat/shared/api"
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
	parse(req json.RawMessage) (w *walk, build func() (json.RawMessage, error), err error)
	// urls tells whether the format's image blocks can carry a URL.
	urls() bool
}

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

func set(o *rawObject, key string) func(jsonValue) {
	return func(v jsonValue) { o.set(key, v) }
}

func str(s string) json.RawMessage {
	raw, _ := api.Marshal(s)
	return raw
}

// badRole is the 400 for a message role the format does not have; roles
// lists the ones it does, as a sentence.
func badRole(path, role, roles string) error {
	return api.BadRequest(path+".role", "%s.role %q is not %s", path, role, roles)
}

// countImages is an other func that counts blocks of an image type.
func countImages(w *walk, imageType string) func(*rawObject, string, string, *rawList, int) error {
	return func(_ *rawObject, typ, _ string, _ *rawList, _ int) error {
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

func (piFormat) parse(req json.RawMessage) (*walk, func() (json.RawMessage, error), error) {
	return walkMessages(req, func(w *walk, msg *rawObject, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user", "toolResult":
			return w.typedContent(msg.fields["content"], path+".content", true, "text", piImage, countImages(w, "image"), set(msg, "content"))
		default:
			return badRole(path, role, "user, assistant or toolResult")
		}
	})
}

func piImage(p picture, text *rawObject) jsonValue {
	b := object(map[string]jsonValue{
		"type":     rawValue(str("image")),
		"data":     quoted{p.b64},
		"mimeType": quoted{p.mimeType},
		"name":     quoted{p.name},
	})
	if text != nil {
		// The ref block's other fields were the image block's (offload
		// keeps them); they go back onto the image.
		for k, v := range text.fields {
			if _, ok := b.fields[k]; !ok && k != "text" {
				b.fields[k] = v
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

func (anthropicFormat) parse(req json.RawMessage) (*walk, func() (json.RawMessage, error), error) {
	return walkMessages(req, func(w *walk, msg *rawObject, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user":
		default:
			return badRole(path, role, "user or assistant")
		}
		other := func(b *rawObject, typ, bpath string, l *rawList, j int) error {
			switch typ {
			case "image":
				w.images++
			case "tool_result":
				if err := w.typedContent(b.fields["content"], bpath+".content", true, "text", anthropicImage, countImages(w, "image"), set(b, "content")); err != nil {
					return err
				}
				w.commitObject(b, func(v jsonValue) { l.set(j, v) })
			}
			return nil
		}
		return w.typedContent(msg.fields["content"], path+".content", true, "text", anthropicImage, other, set(msg, "content"))
	})
}

func anthropicImage(p picture, text *rawObject) jsonValue {
	source := object(map[string]jsonValue{"type": rawValue(str("url")), "url": rawValue(str(p.url))})
	if p.url == "" {
		source = object(map[string]jsonValue{"type": rawValue(str("base64")), "media_type": quoted{p.mimeType}, "data": quoted{p.b64}})
	}
	b := object(map[string]jsonValue{"type": rawValue(str("image")), "source": source})
	if text != nil {
		if cc, ok := text.fields["cache_control"]; ok {
			b.fields["cache_control"] = cc
		}
	}
	return b
}

// OpenAI Chat Completions: refs are restored in user messages as
// {"type": "image_url", "image_url": {"url": data URL or link}}. Tool
// messages take text only: a ref there stays text (reason "format").
type openAIFormat struct{}

func (openAIFormat) urls() bool { return true }

func (openAIFormat) parse(req json.RawMessage) (*walk, func() (json.RawMessage, error), error) {
	return walkMessages(req, func(w *walk, msg *rawObject, path, role string) error {
		switch role {
		case "system", "developer", "assistant":
			return nil
		case "user":
			return w.typedContent(msg.fields["content"], path+".content", true, "text", openAIImage, countImages(w, "image_url"), set(msg, "content"))
		case "tool", "function":
			return w.typedContent(msg.fields["content"], path+".content", false, "text", openAIImage, ignoreOthers, set(msg, "content"))
		default:
			return badRole(path, role, "system, developer, user, assistant, tool or function")
		}
	})
}

func openAIImage(p picture, _ *rawObject) jsonValue {
	var url jsonValue = rawValue(str(p.url))
	if p.url == "" {
		url = quoted{"data:", p.mimeType, ";base64,", p.b64}
	}
	return object(map[string]jsonValue{
		"type":      rawValue(str("image_url")),
		"image_url": object(map[string]jsonValue{"url": url}),
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

func (bedrockFormat) parse(req json.RawMessage) (*walk, func() (json.RawMessage, error), error) {
	return walkMessages(req, func(w *walk, msg *rawObject, path, role string) error {
		switch role {
		case "assistant":
			return nil
		case "user":
		default:
			return badRole(path, role, "user or assistant")
		}
		raw, ok := msg.fields["content"]
		if !ok || isNull(raw) {
			return api.BadRequest(path+".content", "%s.content is required", path)
		}
		return w.bedrockContent(raw, path+".content", set(msg, "content"), true)
	})
}

// bedrockContent walks a list of Converse content blocks; outer is false
// inside a tool result, where another tool result cannot be.
func (w *walk) bedrockContent(raw json.RawMessage, path string, setContent func(jsonValue), outer bool) error {
	l, err := parseList(raw, path)
	if err != nil {
		return err
	}
	for j := range l.items {
		bpath := index(path, j)
		b, err := parseObject(l.items[j], bpath)
		if err != nil {
			return err
		}
		if t, ok := b.fields["text"]; ok {
			text, ok := jsonString(t)
			if !ok {
				return api.BadRequest(bpath+".text", "%s.text must be a string", bpath)
			}
			if name := refs.RefName(text); name != "" {
				w.slots = append(w.slots, &slot{name: name, path: bpath, canImage: true, fill: func(p picture) error {
					l.set(j, bedrockImage(p))
					return nil
				}})
			}
			continue
		}
		if _, ok := b.fields["image"]; ok {
			w.images++
			continue
		}
		if tr, ok := b.fields["toolResult"]; ok && outer {
			trPath := bpath + ".toolResult"
			result, err := parseObject(tr, trPath)
			if err != nil {
				return err
			}
			if c, ok := result.fields["content"]; ok && !isNull(c) {
				if err := w.bedrockContent(c, trPath+".content", set(result, "content"), false); err != nil {
					return err
				}
			}
			w.commitObject(result, set(b, "toolResult"))
			w.commitObject(b, func(v jsonValue) { l.set(j, v) })
		}
	}
	w.commitList(l, setContent)
	return nil
}

// bedrockImage is a Converse image block; its format is the MIME subtype.
func bedrockImage(p picture) jsonValue {
	return object(map[string]jsonValue{"image": object(map[string]jsonValue{
		"format": quoted{strings.TrimPrefix(p.mimeType, "image/")},
		"source": object(map[string]jsonValue{"bytes": quoted{p.b64}}),
	})})
}
