// A small client of the durachat HTTP API: the routes the pi extension uses.

import { createHash } from "node:crypto";

/** A pi-ai content block, as durachat reads and writes it. */
export interface Block {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
  name?: string;
  [key: string]: unknown;
}

/** A pi tool result: content blocks and an error flag. */
export interface ToolResult {
  content: Block[];
  isError?: boolean;
  details?: unknown;
}

/** A memory tool's definition for the model. */
export interface ToolDef {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The memory view, as GET .../view answers it. */
export interface View {
  view: string;
  lines: number;
  bytes: number;
  unbuilt: number;
  retrying: number;
  stalled: boolean;
  lastError: string;
}

/** An error answer of the API, or a failure to reach it. */
export class DurachatError extends Error {
  constructor(
    message: string,
    /** HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    readonly code: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "DurachatError";
  }
}

/** An image an offload kept inline: its block's index and why ("unavailable": the store is down). */
export interface InlineImage {
  index: number;
  reason: string;
}

/** What POST .../uploads answers: stored already, or where to PUT the bytes. */
export interface UploadAnswer {
  name: string;
  stored: boolean;
  upload: { method: string; url: string; headers: Record<string, string>; expires: string } | null;
}

/**
 * The body size past which after-tool and the message log upload a
 * request's inline images first and send their refs (docs/api.md,
 * "Limits"): Lambda's 6 MiB less room for the event, as the Go client's
 * DefaultBodyLimit.
 */
export const defaultBodyLimit = 6 * 1024 * 1024 - 64 * 1024;

export interface ClientOptions {
  url: string;
  token?: string;
  /** Bounds each call but the view's wait (default 15 s). */
  timeoutMs?: number;
  /** The body size past which images are uploaded first (default defaultBodyLimit); 0 or less never uploads. */
  bodyLimit?: number;
  fetch?: typeof fetch;
}

/** The ref block of an image name: what goes in place of an uploaded image. */
export function refBlock(name: string): Block {
  return { type: "text", text: `[image ${name}]` };
}

/** The type of image bytes, read from them as the server does. */
function imageType(data: Buffer): string | undefined {
  const at = (s: string, offset = 0) => data.subarray(offset, offset + s.length).equals(Buffer.from(s, "latin1"));
  if (at("\x89PNG\r\n\x1a\n")) return "image/png";
  if (at("\xff\xd8\xff")) return "image/jpeg";
  if (at("GIF87a") || at("GIF89a")) return "image/gif";
  if (at("RIFF") && at("WEBPVP", 8)) return "image/webp";
  return undefined;
}

/**
 * What the upload route needs to know of image bytes: the name they get
 * inline (the first 16 hex digits of the SHA-256 of their standard base64),
 * their size, type and SHA-256.
 */
export function describeImage(data: Buffer, mimeType?: string) {
  return {
    name: createHash("sha256").update(data.toString("base64")).digest("hex").slice(0, 16),
    size: data.length,
    type: imageType(data) ?? mimeType ?? "application/octet-stream",
    sha256: createHash("sha256").update(data).digest("hex"),
  };
}

/** The error of an answer that is not OK: the API's error object, else the answer's start. */
function answerError(what: string, status: number, json: any, text: string): DurachatError {
  const e = json?.error;
  return new DurachatError(`${what}: ${status} ${e?.code ?? ""}: ${e?.message ?? text.slice(0, 200)}`, status, e?.code ?? "http_" + status, e?.field);
}

/** A JSON body's size inside a Lambda event: as a JSON string, each quote and backslash escaped. */
function travelSize(body: string): number {
  let n = Buffer.byteLength(body);
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c === 34 || c === 92) n++;
  }
  return n;
}

/** How long a view may wait for its lines: the server waits about 20 s. */
const viewTimeoutMs = 30_000;

/** How long the PUT of an image's bytes (at most 16 MiB) may take. */
const putTimeoutMs = 120_000;

/** A JSON answer, or undefined when it is none (an S3 error is XML). */
function parseJSON(text: string): any {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

export class Client {
  private readonly base: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly bodyLimit: number;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ClientOptions) {
    this.base = opts.url.replace(/\/+$/, "");
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? 15_000;
    this.bodyLimit = opts.bodyLimit ?? defaultBodyLimit;
    this.fetchFn = opts.fetch ?? fetch;
  }

  private chatPath(chat: string, route: string): string {
    return `/v1/chats/${encodeURIComponent(chat)}${route}`;
  }

  /** Fetches within the timeout; a failure to reach the server is a DurachatError of status 0. */
  private async send(what: string, url: string, init: RequestInit, opts: { timeoutMs?: number; signal?: AbortSignal }): Promise<Response> {
    const signals = [AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs)];
    if (opts.signal) signals.push(opts.signal);
    try {
      return await this.fetchFn(url, { ...init, signal: AbortSignal.any(signals) });
    } catch (err) {
      const cause = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
      throw new DurachatError(`${what}: ${cause}`, 0, "unreachable");
    }
  }

  /** Sends one call and decodes its JSON answer. A 404 that carries a tool result is an answer. */
  async call<T>(method: string, path: string, body?: unknown, opts: { timeoutMs?: number; signal?: AbortSignal; toolResult404?: boolean } = {}): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const what = `${method} ${path}`;
    const resp = await this.send(what, this.base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }, opts);
    const text = await resp.text();
    const json = parseJSON(text);
    if (resp.ok || (resp.status === 404 && opts.toolResult404 && Array.isArray(json?.content))) {
      return json as T;
    }
    throw answerError(what, resp.status, json, text);
  }

  /**
   * Stores image bytes without them passing through a request to durachat
   * (docs/api.md, "Direct uploads"): asks for an upload target and PUTs the
   * bytes there, unless the image is stored already. Returns the image's
   * name, whose ref block goes where the image would have.
   */
  async upload(chat: string, data: Buffer, mimeType?: string, signal?: AbortSignal): Promise<string> {
    const input = describeImage(data, mimeType);
    const a = await this.call<UploadAnswer>("POST", this.chatPath(chat, "/uploads"), input, { signal });
    if (a.stored) return a.name;
    const what = `upload ${input.name}`;
    if (!a.upload) throw new DurachatError(`${what}: the answer has no target`, 200, "no_target");
    // Every header of the target but Content-Length (the body's own), and no
    // Authorization: the target's signature is the credential.
    const headers = Object.fromEntries(Object.entries(a.upload.headers ?? {}).filter(([k]) => k.toLowerCase() !== "content-length"));
    const resp = await this.send(what, a.upload.url, { method: a.upload.method || "PUT", headers, body: data }, { timeoutMs: putTimeoutMs, signal });
    const text = await resp.text();
    if (!resp.ok) throw answerError(what, resp.status, parseJSON(text), text);
    return a.name;
  }

  /**
   * When body would pass the body limit, uploads the inline images of
   * contents (the caller's copies, changed in place) and puts their ref
   * blocks in their place.
   */
  private async uploadIfOver(chat: string, body: unknown, contents: Block[][], signal?: AbortSignal): Promise<void> {
    if (this.bodyLimit <= 0 || travelSize(JSON.stringify(body)) <= this.bodyLimit) return;
    for (const content of contents) {
      for (const [i, b] of content.entries()) {
        if (b?.type !== "image" || typeof b.data !== "string") continue;
        const raw = Buffer.from(b.data, "base64");
        if (raw.length === 0) continue; // sent as it is: the server names what is wrong
        const name = await this.upload(chat, raw, b.mimeType, signal);
        content[i] = refBlock(name);
      }
    }
  }

  /**
   * Logs messages; the receipt makes a repeat log nothing twice. Past the
   * body limit their images are uploaded first and logged as refs (the
   * caller's messages are not changed).
   */
  async append(chat: string, messages: unknown[], receipt: string): Promise<number[]> {
    const contents: Block[][] = [];
    const sent = messages.map((m: any) => {
      if (!Array.isArray(m?.content)) return m;
      const content = m.content.slice();
      contents.push(content);
      return { ...m, content };
    });
    const body = { messages: sent, receipt };
    await this.uploadIfOver(chat, body, contents);
    const r = await this.call<{ ids: number[] }>("POST", this.chatPath(chat, "/messages"), body);
    return r.ids;
  }

  /** The memory view, waiting until its lines are built. */
  view(chat: string, signal?: AbortSignal): Promise<View> {
    return this.call<View>("GET", this.chatPath(chat, "/view?wait=turn"), undefined, { timeoutMs: viewTimeoutMs, signal });
  }

  async tools(chat: string): Promise<ToolDef[]> {
    const r = await this.call<{ tools: ToolDef[] }>("GET", this.chatPath(chat, "/tools"));
    return r.tools;
  }

  /** Answers a memory tool call (zoom, date, search). */
  tool(chat: string, name: string, args: unknown, signal?: AbortSignal): Promise<ToolResult> {
    return this.call<ToolResult>("POST", this.chatPath(chat, `/tools/${encodeURIComponent(name)}`), args ?? {}, { signal, toolResult404: true });
  }

  /**
   * after-tool: the result's images become refs; past the body limit they
   * are uploaded first. A nested call (one another tool made) passes
   * through: skipped "nested". bounds overrides the host's bound on the
   * result's text.
   */
  async afterTool(chat: string, call: { id: string; name: string; nested?: boolean }, result: ToolResult, signal?: AbortSignal, bounds?: { maxBytes?: number; maxLines?: number }) {
    const content = result.content.slice();
    const body = { call, result: { ...result, content }, bounds };
    if (!call.nested) await this.uploadIfOver(chat, body, [content], signal);
    return this.call<{ result: ToolResult; stored: string[]; inline: InlineImage[]; skipped: string | null }>(
      "POST", this.chatPath(chat, "/hooks/after-tool"), body, { signal });
  }

  /**
   * offload-input: a user message's images become refs, before the host
   * keeps it; past the body limit they are uploaded first.
   */
  async offloadInput(chat: string, message: { role: "user"; content: Block[] | string; [key: string]: unknown }, signal?: AbortSignal) {
    const content = Array.isArray(message.content) ? message.content.slice() : message.content;
    const body = { message: { ...message, content } };
    if (Array.isArray(content)) await this.uploadIfOver(chat, body, [content], signal);
    return this.call<{ message: { role: "user"; content: Block[] | string; [key: string]: unknown }; stored: string[]; inline: InlineImage[] }>(
      "POST", this.chatPath(chat, "/hooks/offload-input"), body, { signal });
  }

  /**
   * before-request in pi format: refs become images, or with mode
   * "describe" (for a model that takes no images) their descriptions.
   */
  beforeRequest(chat: string, request: { messages: unknown[] }, signal?: AbortSignal, mode?: "describe") {
    return this.call<{ request: { messages: unknown[] }; restored: string[]; unrestored: { name: string; reason: string }[] }>(
      "POST", this.chatPath(chat, "/hooks/before-request"), { format: "pi", request, mode }, { signal });
  }
}
