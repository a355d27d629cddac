// The AI SDK's messages as pi-ai messages and back: the format durachat's
// before-request ("pi") and its log take. The conversion loses nothing:
// what pi-ai has no field for (provider options, file names, a tool
// output's kind, a part pi-ai has no block for) travels beside it under
// the "aiSdk" key of the message or block, which durachat keeps as it is,
// so fromPi(toPi(prompt)) is the prompt again. A ref in a user message or
// a tool result that before-request has made an image comes back as a
// file part of the image's bytes.
//
// It reads both the language-model prompt a middleware sees
// (LanguageModelV4Prompt) and the ModelMessage values a host keeps, and
// gives back the prompt's shapes, which ModelMessage also takes.

import { fromBase64, imageType, refName, toBase64 } from "./images.js";
import type { Block, Message } from "./types.js";

/** A part of an AI SDK message: its type and its fields. */
export type SdkPart = { type: string; [key: string]: unknown };
/** An AI SDK message, of a model prompt or of a host's history. */
export type SdkMessage = { role: string; content: string | SdkPart[]; providerOptions?: unknown; [key: string]: unknown };

/** The key of what the AI SDK has and pi-ai has not, on a pi message or block. */
export const metaKey = "aiSdk";

type Meta = Record<string, unknown>;
type PiBlock = Block & { [metaKey]?: Meta };
type PiMessage = Message & { [metaKey]?: Meta };

/** A JSON form of a value that may hold bytes or URLs: {"$bytes": base64}, {"$url": href}. */
export function encodeValue(v: unknown): unknown {
  if (v instanceof Uint8Array) return { $bytes: toBase64(v) };
  if (v instanceof ArrayBuffer) return { $bytes: toBase64(new Uint8Array(v)) };
  if (v instanceof URL) return { $url: v.href };
  if (Array.isArray(v)) return v.map(encodeValue);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = encodeValue(x);
    return out;
  }
  return v;
}

/** The value encodeValue encoded. */
export function decodeValue(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decodeValue);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o);
    if (keys.length === 1 && typeof o.$bytes === "string") return fromBase64(o.$bytes);
    if (keys.length === 1 && typeof o.$url === "string") return new URL(o.$url);
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) out[k] = decodeValue(x);
    return out;
  }
  return v;
}

const base64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The inline image of a part, when it has one pi-ai can carry: its base64,
 * its type, where in the part the data was, and whether it was bytes.
 */
function inlineImage(p: SdkPart): { data: string; mimeType: string; at: "image" | "data" | "data.data"; bytes: boolean } | undefined {
  let raw: unknown;
  let at: "image" | "data" | "data.data";
  if (p.type === "image") {
    raw = p.image;
    at = "image";
  } else if (p.type === "file" || p.type === "image-data" || p.type === "media") {
    const d = p.data as { type?: unknown; data?: unknown } | unknown;
    if (d && typeof d === "object" && !(d instanceof Uint8Array) && !(d instanceof ArrayBuffer) && !(d instanceof URL)) {
      if ((d as { type?: unknown }).type !== "data") return undefined;
      raw = (d as { data?: unknown }).data;
      at = "data.data";
    } else {
      raw = d;
      at = "data";
    }
  } else {
    return undefined;
  }
  let data: string;
  let bytes = false;
  if (raw instanceof Uint8Array || raw instanceof ArrayBuffer) {
    const u = raw instanceof Uint8Array ? raw : new Uint8Array(raw);
    // A Buffer is a Uint8Array: it comes back as one.
    data = toBase64(u);
    bytes = true;
  } else if (typeof raw === "string" && raw !== "" && base64.test(raw)) {
    data = raw;
  } else {
    return undefined; // a URL, a provider reference, a data URL: pi-ai has no image block for it
  }
  const declared = typeof p.mediaType === "string" ? p.mediaType : undefined;
  let mimeType = declared;
  if (!mimeType || mimeType === "image/*") {
    try {
      mimeType = imageType(fromBase64(data.slice(0, 64)));
    } catch {
      mimeType = undefined;
    }
  }
  if (!mimeType?.startsWith("image/")) return undefined;
  return { data, mimeType, at, bytes };
}

/** The part without its image data, to rebuild it around the block's data. */
function withoutData(p: SdkPart, at: "image" | "data" | "data.data"): unknown {
  const copy: Record<string, unknown> = { ...p };
  if (at === "image") copy.image = null;
  else if (at === "data") copy.data = null;
  else copy.data = { ...(p.data as object), data: null };
  return encodeValue(copy);
}

/** A part pi-ai has no block for, as a text block that names it and carries it. */
function opaque(p: SdkPart): PiBlock {
  let text = `[${p.type}]`;
  if (typeof p.mediaType === "string") text = `[${p.type} ${p.mediaType}${typeof p.filename === "string" ? " " + p.filename : ""}]`;
  return { type: "text", text, [metaKey]: { part: encodeValue(p) } };
}

/** The fields of a part beside those given, for its block's meta (undefined when none). */
function rest(p: SdkPart, known: string[]): Meta | undefined {
  const extra: Meta = {};
  for (const [k, v] of Object.entries(p)) if (!known.includes(k) && v !== undefined) extra[k] = encodeValue(v);
  return Object.keys(extra).length ? { fields: extra } : undefined;
}

function withMeta<T extends object>(o: T, meta: Meta | undefined): T {
  return meta ? { ...o, [metaKey]: meta } : o;
}

/** A part of a user message or of a tool's content output as a pi block. */
function contentBlock(p: SdkPart): PiBlock {
  if (p.type === "text" && typeof p.text === "string") return withMeta({ type: "text", text: p.text }, rest(p, ["type", "text"]));
  const img = inlineImage(p);
  if (img) {
    const block: PiBlock = { type: "image", data: img.data, mimeType: img.mimeType, [metaKey]: { part: withoutData(p, img.at), at: img.at, bytes: img.bytes } };
    const name = (p.providerOptions as { durachat?: { name?: unknown } } | undefined)?.durachat?.name;
    if (typeof name === "string" && /^[0-9a-f]{16}$/.test(name)) block.name = name;
    return block;
  }
  return opaque(p);
}

/** A part of an assistant message as a pi block. */
function assistantBlock(p: SdkPart): PiBlock {
  switch (p.type) {
    case "text":
      if (typeof p.text === "string") return withMeta({ type: "text", text: p.text }, rest(p, ["type", "text"]));
      break;
    case "reasoning":
      if (typeof p.text === "string") return withMeta({ type: "thinking", thinking: p.text }, rest(p, ["type", "text"]));
      break;
    case "tool-call":
      return withMeta(
        { type: "toolCall", id: String(p.toolCallId), name: String(p.toolName), arguments: encodeValue(p.input) },
        rest(p, ["type", "toolCallId", "toolName", "input"]),
      );
  }
  return opaque(p);
}

type Output = { type: string; value?: unknown; reason?: string; providerOptions?: unknown; [key: string]: unknown };

/** A tool output as a pi result's content and error flag, and what rebuilds the output. */
export function outputToPi(output: Output): { content: PiBlock[]; isError: boolean; meta: Meta } {
  const meta: Meta = { output: output.type };
  const extra = rest(output as SdkPart, ["type", "value", "reason"]);
  if (extra) meta.fields = extra.fields;
  switch (output.type) {
    case "text":
    case "error-text":
      return { content: [{ type: "text", text: String(output.value) }], isError: output.type === "error-text", meta };
    case "json":
    case "error-json":
      return { content: [{ type: "text", text: JSON.stringify(output.value ?? null) }], isError: output.type === "error-json", meta };
    case "execution-denied":
      if (output.reason === undefined) meta.noReason = true;
      return { content: [{ type: "text", text: output.reason ?? "The tool's execution was denied." }], isError: true, meta };
    case "content":
      return { content: (output.value as SdkPart[]).map(contentBlock), isError: false, meta };
  }
  return { content: [{ type: "text", text: `[${output.type}]`, [metaKey]: { part: encodeValue(output) } }], isError: false, meta: { output: "opaque" } };
}

/** A pi block as a part of a user message or of a tool's content output. */
function blockToPart(b: PiBlock): SdkPart {
  const meta = b[metaKey];
  const fields = (meta?.fields ? decodeValue(meta.fields) : {}) as Meta;
  if (b.type === "image" && typeof b.data === "string") {
    const part = meta?.part ? (decodeValue(meta.part) as SdkPart) : undefined;
    if (part) {
      const data = meta?.bytes ? fromBase64(b.data) : b.data;
      if (meta?.at === "image") return { ...part, image: data };
      if (meta?.at === "data") return { ...part, data };
      return { ...part, data: { ...(part.data as object), data } };
    }
    // An image durachat gave (before-request in place of a ref, a zoom):
    // its stored name travels in the part's durachat options, so that the
    // part offloaded again keeps that name and stores nothing new.
    const given: SdkPart = { type: "file", mediaType: String(b.mimeType), data: { type: "data", data: b.data }, ...fields };
    if (typeof b.name === "string" && b.name) {
      given.providerOptions = { ...(given.providerOptions as object | undefined), durachat: { name: b.name } };
    }
    return given;
  }
  // An image durachat stored (after-tool keeps the block's other fields):
  // its ref now.
  if (b.type === "text" && meta?.at) return { type: "text", text: String(b.text ?? "") };
  if (meta?.part) return decodeValue(meta.part) as SdkPart;
  if (b.type === "text") return { type: "text", text: String(b.text ?? ""), ...fields };
  return { type: "text", text: JSON.stringify(b), ...fields };
}

/** A pi result as the tool output it came from, or a content output when before-request put images in it. */
export function piToOutput(content: PiBlock[], isError: boolean, meta: Meta | undefined): Output {
  const fields = (meta?.fields ? decodeValue(meta.fields) : {}) as Meta;
  const kind = meta?.output;
  const onlyText = content.length === 1 && content[0].type === "text" && !content[0][metaKey]?.part;
  const text = onlyText ? String(content[0].text ?? "") : "";
  if (kind === "opaque" && content.length === 1 && content[0][metaKey]?.part) return decodeValue(content[0][metaKey]!.part) as Output;
  if (onlyText) {
    if (kind === "text" || kind === "error-text") return { type: kind, value: text, ...fields };
    if (kind === "json" || kind === "error-json") {
      try {
        return { type: kind, value: JSON.parse(text), ...fields };
      } catch {
        // changed on the way: it goes as content
      }
    }
    if (kind === "execution-denied") return meta?.noReason ? { type: kind, ...fields } : { type: kind, reason: text, ...fields };
    if (kind === undefined) return { type: isError ? "error-text" : "text", value: text };
  }
  return { type: "content", value: content.map(blockToPart), ...(kind === "content" ? fields : {}) };
}

/** The message's fields beside role and content, for its meta. */
function messageMeta(m: SdkMessage, extra: Meta = {}): Meta | undefined {
  const meta: Meta = { ...extra };
  const others = rest(m as unknown as SdkPart, ["role", "content"]);
  if (others) meta.fields = others.fields;
  return Object.keys(meta).length ? meta : undefined;
}

/**
 * AI SDK messages as pi-ai messages: user and assistant messages one for
 * one, a tool message as one toolResult message per result (marked with
 * the message's index, so they come back as one), a system message as an
 * assistant message marked as the system's (before-request never changes
 * those; the log leaves them out).
 */
export function toPi(messages: readonly SdkMessage[]): PiMessage[] {
  const out: PiMessage[] = [];
  messages.forEach((m, i) => {
    switch (m.role) {
      case "system":
        out.push(withMeta({ role: "assistant" as const, content: [{ type: "text" as const, text: String(m.content) }] }, messageMeta(m, { role: "system" })));
        return;
      case "user":
        out.push(withMeta({ role: "user" as const, content: typeof m.content === "string" ? m.content : m.content.map(contentBlock) }, messageMeta(m)));
        return;
      case "assistant":
        out.push(withMeta({ role: "assistant" as const, content: typeof m.content === "string" ? m.content : m.content.map(assistantBlock) }, messageMeta(m)));
        return;
      case "tool": {
        const parts = typeof m.content === "string" ? [] : m.content;
        const meta = messageMeta(m, { group: i });
        if (parts.length === 0) {
          out.push({ role: "toolResult", toolCallId: "", toolName: "", content: [], isError: false, [metaKey]: { ...meta, empty: true } });
          return;
        }
        parts.forEach((p, k) => {
          const first = k === 0 ? meta : { group: i };
          if (p.type !== "tool-result") {
            const id = typeof p.approvalId === "string" ? p.approvalId : "";
            out.push({ role: "toolResult", toolCallId: id, toolName: "", content: [opaque(p)], isError: false, [metaKey]: { ...first, opaque: true } });
            return;
          }
          const r = outputToPi(p.output as Output);
          const partFields = rest(p, ["type", "toolCallId", "toolName", "output"]);
          out.push({
            role: "toolResult", toolCallId: String(p.toolCallId), toolName: String(p.toolName), content: r.content, isError: r.isError,
            [metaKey]: { ...first, result: r.meta, ...(partFields ? { partFields: partFields.fields } : {}) },
          });
        });
        return;
      }
      default:
        throw new TypeError(`durachat: a message of role ${JSON.stringify(m.role)} is not an AI SDK message`);
    }
  });
  return out;
}

/** The AI SDK messages of pi-ai messages made by toPi (and changed by before-request). */
export function fromPi(messages: readonly PiMessage[]): SdkMessage[] {
  const out: SdkMessage[] = [];
  let group: { index: unknown; message: SdkMessage } | undefined;
  for (const m of messages) {
    const meta = m[metaKey];
    const fields = (meta?.fields ? decodeValue(meta.fields) : {}) as Meta;
    const content = m.content as string | PiBlock[];
    if (m.role !== "toolResult") group = undefined;
    if (m.role === "assistant" && meta?.role === "system") {
      const text = typeof content === "string" ? content : content.map((b) => String(b.text ?? "")).join("");
      out.push({ role: "system", content: text, ...fields });
      continue;
    }
    if (m.role === "user") {
      out.push({ role: "user", content: typeof content === "string" ? content : content.map(blockToPart), ...fields });
      continue;
    }
    if (m.role === "assistant") {
      out.push({ role: "assistant", content: typeof content === "string" ? content : content.map(assistantPart), ...fields });
      continue;
    }
    // toolResult: one part of the tool message its group names.
    const inGroup = group !== undefined && meta?.group !== undefined && group.index === meta.group;
    if (!inGroup) {
      group = { index: meta?.group, message: { role: "tool", content: [], ...fields } };
      out.push(group.message);
    }
    if (meta?.empty) continue;
    const parts = group!.message.content as SdkPart[];
    const blocks = (typeof content === "string" ? [{ type: "text", text: content }] : content) as PiBlock[];
    if (meta?.opaque && blocks[0]?.[metaKey]?.part) {
      parts.push(decodeValue(blocks[0][metaKey]!.part) as SdkPart);
      continue;
    }
    const partFields = (meta?.partFields ? decodeValue(meta.partFields) : {}) as Meta;
    parts.push({
      type: "tool-result", toolCallId: String(m.toolCallId), toolName: String(m.toolName),
      output: piToOutput(blocks, m.isError === true, meta?.result as Meta | undefined), ...partFields,
    });
  }
  return out;
}

/** A pi block of an assistant message as its AI SDK part. */
function assistantPart(b: PiBlock): SdkPart {
  const meta = b[metaKey];
  if (meta?.part) return decodeValue(meta.part) as SdkPart;
  const fields = (meta?.fields ? decodeValue(meta.fields) : {}) as Meta;
  switch (b.type) {
    case "text":
      return { type: "text", text: String(b.text ?? ""), ...fields };
    case "thinking":
      return { type: "reasoning", text: String(b.thinking ?? ""), ...fields };
    case "toolCall":
      return { type: "tool-call", toolCallId: String(b.id), toolName: String(b.name), input: decodeValue(b.arguments), ...fields };
  }
  return blockToPart(b);
}

/** Whether a text is exactly one ref. */
const isRef = (text: unknown) => typeof text === "string" && refName({ type: "text", text }) !== undefined;

/** Whether an AI SDK message holds a ref where before-request would put an image back. */
export function holdsRef(m: SdkMessage): boolean {
  if (typeof m.content === "string") return m.role === "user" && isRef(m.content);
  if (m.role === "user") return m.content.some((p) => p.type === "text" && isRef(p.text));
  if (m.role !== "tool") return false;
  return m.content.some((p) => {
    const o = p.output as Output | undefined;
    if (p.type !== "tool-result" || !o) return false;
    if (o.type === "text" || o.type === "error-text") return isRef(o.value);
    return o.type === "content" && Array.isArray(o.value) && o.value.some((v: SdkPart) => v.type === "text" && isRef(v.text));
  });
}
