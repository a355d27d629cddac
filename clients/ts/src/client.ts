// The client of the durachat HTTP API: one Client per server, one Chat per
// chat. It behaves as the Go client does (client/ in this repository): a
// 503 is retried after its Retry-After only where repeating the call is
// safe, every API error is a DurachatError, and a body past the body limit
// has its inline images uploaded first.

import { describeImage, fromBase64, refBlock } from "./images.js";
import { importParts } from "./importfile.js";
import type {
  AfterToolInput,
  AfterToolResult,
  Answer,
  BeforeRequestInput,
  BeforeRequestResult,
  Block,
  ChatList,
  Deletion,
  EraseRequest,
  Erasure,
  ImportResult,
  MemorySettings,
  Message,
  MessagePage,
  OffloadInputResult,
  Retention,
  SearchArgs,
  Status,
  ToolDef,
  ToolResult,
  Tree,
  UploadAnswer,
  UploadInput,
  View,
  ZoomArgs,
} from "./types.js";

/** How many times a retry-safe call is sent at most. */
export const defaultAttempts = 4;
/** The longest wait between two attempts, whatever Retry-After says. */
export const defaultMaxWaitMs = 30_000;
/** How long one call may take, retries included, unless its options say otherwise. */
export const defaultTimeoutMs = 120_000;

/**
 * Body limits of the deployments (docs/api.md, "Limits"). A body past the
 * client's limit has its inline images uploaded first and sent as refs.
 * lambdaBodyLimit is Lambda's 6 MiB invocation limit, counted on the body
 * as it travels inside the event (quotes and backslashes escaped), less
 * room for the event's other fields; localBodyLimit is the local server's.
 */
export const lambdaBodyLimit = 6 * 1024 * 1024 - 64 * 1024;
export const localBodyLimit = 10 * 1024 * 1024;
/** The smaller: a client that does not know its deployment stays within both. */
export const defaultBodyLimit = lambdaBodyLimit;

/** The wait when a 503 has no usable Retry-After. */
const fallbackWaitMs = 1_000;
/** Bounds an answer read into memory: before-request may inline up to 64 MiB of images on top of the request. */
const maxAnswer = 256 * 1024 * 1024;

/** The API's error codes. */
export const codes = {
  badRequest: "bad_request",
  unauthorized: "unauthorized",
  forbidden: "forbidden",
  notFound: "not_found",
  methodNotAllowed: "method_not_allowed",
  conflict: "conflict",
  deleting: "deleting",
  expired: "expired",
  tooLarge: "too_large",
  internal: "internal",
  unavailable: "unavailable",
  /** Not the API's: the server could not be reached, or did not answer in time. */
  unreachable: "unreachable",
} as const;

/**
 * An error answer of the API, {"error": {"code", "message", "field"}} with
 * its status. An answer that is not durachat's JSON (a proxy's error page)
 * gets the code of its status and the start of its body as message; a
 * server that could not be reached is status 0, code "unreachable".
 */
export class DurachatError extends Error {
  /** The HTTP status, such as 400 or 503; 0 when no answer came. */
  readonly status: number;
  /** The API's code, such as "bad_request" or "unavailable". */
  readonly code: string;
  /** The field at fault, when the server names one. */
  readonly field?: string;
  /** The server's Retry-After in milliseconds, when it sent one. */
  readonly retryAfterMs?: number;
  /** The answer's X-Request-Id, also on the server's logs. */
  readonly requestId?: string;
  /** The API's message, without the status and code this error's message starts with. */
  readonly detail: string;

  constructor(init: { status: number; code: string; message: string; field?: string; retryAfterMs?: number; requestId?: string; cause?: unknown }) {
    let text = `durachat: ${init.status} ${init.code}: ${init.message}`;
    if (init.field) text += ` (field ${init.field})`;
    super(text, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "DurachatError";
    this.status = init.status;
    this.code = init.code;
    this.field = init.field;
    this.retryAfterMs = init.retryAfterMs;
    this.requestId = init.requestId;
    this.detail = init.message;
  }
}

/** Whether err is a 503 from the server (after any retries): the call may work later. */
export function isUnavailable(err: unknown): boolean {
  return err instanceof DurachatError && err.status === 503;
}

export interface ClientOptions {
  /** The bearer credential (a JWT in AWS, a configured token locally); without it no Authorization header is sent. */
  token?: string;
  /** How many times a retry-safe call is sent at most on a 503 (1 turns retries off); default 4. */
  attempts?: number;
  /** The longest wait between two attempts; default 30 s. */
  maxWaitMs?: number;
  /** How long one call may take, retries included; default 120 s. */
  timeoutMs?: number;
  /**
   * The body size past which the hooks and append upload a request's
   * inline images before sending it (localBodyLimit for a client of the
   * local server only); 0 or less never uploads. Default defaultBodyLimit.
   */
  bodyLimit?: number;
  /** The fetch to send with; default the global fetch as it is when the client is made. */
  fetch?: typeof fetch;
}

/** What every call takes: a signal that aborts it, and a bound on its time (retries included). */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** One route's request. */
interface Call {
  method: string;
  /** Already escaped. */
  path: string;
  query?: Record<string, string | undefined>;
  /** Encoded as JSON when not undefined. */
  body?: unknown;
  /** When set, the body as it is (JSONL), sent instead of body. */
  raw?: Uint8Array;
  /** Marks a call that is safe to repeat after a 503. */
  retry: boolean;
  /** Takes a 404 that carries a tool result as the answer (a memory tool's error for the model). */
  accept404?: boolean;
}

/** Reads a Retry-After header (seconds or an HTTP date) in milliseconds. */
export function retryAfterMs(h: string | null, now = Date.now()): number {
  const v = (h ?? "").trim();
  if (v === "") return fallbackWaitMs;
  if (/^-?\d+$/.test(v)) return Math.max(Number(v) * 1000, 0);
  const t = Date.parse(v);
  if (!Number.isNaN(t)) return Math.max(t - now, 0);
  return fallbackWaitMs;
}

/** The API's code for a status, for answers without one. */
function codeOf(status: number): string {
  switch (status) {
    case 400: return codes.badRequest;
    case 401: return codes.unauthorized;
    case 403: return codes.forbidden;
    case 404: return codes.notFound;
    case 405: return codes.methodNotAllowed;
    case 409: return codes.conflict;
    case 410: return codes.expired;
    case 413: return codes.tooLarge;
    case 502: case 503: case 504: return codes.unavailable;
  }
  return codes.internal;
}

const statusText: Record<number, string> = {
  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
  409: "Conflict", 410: "Gone", 413: "Request Entity Too Large", 500: "Internal Server Error",
  502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
};

/** Turns a non-2xx answer into a DurachatError. */
function apiError(resp: Response, data: Uint8Array): DurachatError {
  const h = resp.headers.get("retry-after");
  const base = {
    status: resp.status,
    requestId: resp.headers.get("x-request-id") ?? undefined,
    retryAfterMs: h ? retryAfterMs(h) : undefined,
  };
  const text = new TextDecoder().decode(data.subarray(0, Math.min(data.length, 64 * 1024)));
  try {
    const e = JSON.parse(text)?.error;
    if (e && typeof e.code === "string" && e.code !== "") {
      return new DurachatError({ ...base, code: e.code, message: String(e.message ?? ""), field: e.field || undefined });
    }
  } catch {
    // not durachat's JSON: a proxy's page
  }
  const message = text.slice(0, 512).trim() || statusText[resp.status] || `status ${resp.status}`;
  return new DurachatError({ ...base, code: codeOf(resp.status), message });
}

/** Reads a body of at most limit bytes; past it, a DurachatError. */
async function readBounded(resp: Response, limit: number, what: string): Promise<Uint8Array> {
  if (!resp.body) return new Uint8Array(0);
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      await reader.cancel();
      throw new DurachatError({ status: resp.status, code: codes.tooLarge, message: `${what}: the answer passes ${limit} bytes` });
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Drains a little of a body so its connection can be reused, then lets it go. */
async function discard(resp: Response): Promise<void> {
  try {
    await readBounded(resp, 64 * 1024, "");
  } catch {
    // too long or cut: the connection is not reused, nothing is lost
  }
}

/** Whether data is a tool result rather than an error. */
function isToolResult(data: unknown): data is ToolResult {
  return typeof data === "object" && data !== null && Array.isArray((data as { content?: unknown }).content);
}

/** A JSON body's size inside a Lambda event: as a JSON string, each quote and backslash escaped. */
function travelSize(body: string): number {
  let n = new TextEncoder().encode(body).length;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c === 34 || c === 92) n++;
  }
  return n;
}

/** A timer that ends early when signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Calls one durachat server. Safe to share between concurrent callers. */
export class Client {
  readonly baseURL: string;
  readonly bodyLimit: number;
  private readonly token?: string;
  private readonly attempts: number;
  private readonly maxWaitMs: number;
  private readonly timeoutMs: number;
  private readonly fetchFn: typeof fetch;

  /** A client of the server at baseURL: scheme, host and an optional path prefix, such as an API Gateway stage. */
  constructor(baseURL: string, opts: ClientOptions = {}) {
    let u: URL;
    try {
      u = new URL(baseURL);
    } catch (err) {
      throw new TypeError(`durachat: base URL ${JSON.stringify(baseURL)}: want http(s)://host[/prefix]`, { cause: err });
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new TypeError(`durachat: base URL ${JSON.stringify(baseURL)}: want http(s)://host[/prefix]`);
    }
    this.baseURL = u.toString().replace(/\/+$/, "");
    this.token = opts.token || undefined;
    this.attempts = Math.max(1, opts.attempts ?? defaultAttempts);
    this.maxWaitMs = opts.maxWaitMs ?? defaultMaxWaitMs;
    this.timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
    this.bodyLimit = opts.bodyLimit ?? defaultBodyLimit;
    // The fetch of the moment the client is made, called unbound (a
    // browser's fetch refuses another this).
    const f = opts.fetch ?? globalThis.fetch;
    this.fetchFn = (...args) => f(...args);
  }

  /** A handle on the chat id (1-128 of A-Z a-z 0-9 . _ -). Nothing is sent: a chat exists once something is logged in it. */
  chat(id: string): Chat {
    return new Chat(this, id);
  }

  /** Checks GET /healthz: resolves when the server's stores answer. */
  async health(opts?: CallOptions): Promise<void> {
    await this.call({ method: "GET", path: "/healthz", retry: true }, opts);
  }

  /** Lists the tenant's chats in id order: those after the chat id after, at most limit (1-100). */
  chats(page: { after?: string; limit?: number } = {}, opts?: CallOptions): Promise<ChatList> {
    return this.call({ method: "GET", path: "/v1/chats", query: { after: page.after || undefined, limit: page.limit ? String(page.limit) : undefined }, retry: true }, opts);
  }

  /** The tenant's default retention. */
  retention(opts?: CallOptions): Promise<Retention> {
    return this.call({ method: "GET", path: "/v1/retention", retry: true }, opts);
  }

  /** Sets the tenant's default retention in days (0: keep). */
  setRetention(days: number, opts?: CallOptions): Promise<Retention> {
    return this.call({ method: "PUT", path: "/v1/retention", body: { days }, retry: true }, opts);
  }

  /** Sends k and decodes a 2xx JSON answer. */
  async call<T>(k: Call, opts?: CallOptions): Promise<T> {
    return this.withDeadline(opts, async (signal, deadline) => {
      const resp = await this.send(k, signal, deadline);
      const data = await readBounded(resp, maxAnswer, `${k.method} ${k.path}`);
      let json: unknown;
      const parse = () => {
        try {
          return data.length ? JSON.parse(new TextDecoder().decode(data)) : undefined;
        } catch (err) {
          throw new DurachatError({ status: resp.status, code: codes.internal, message: `${k.method} ${k.path}: decoding the answer: ${(err as Error).message}` });
        }
      };
      if (resp.status === 404 && k.accept404) {
        try {
          json = JSON.parse(new TextDecoder().decode(data));
        } catch {
          json = undefined;
        }
        if (isToolResult(json)) return json as T;
      }
      if (resp.status < 200 || resp.status > 299) throw apiError(resp, data);
      return parse() as T;
    });
  }

  /** Sends k and hands its answer to read, whatever its status; the answer's body is read by read. */
  async raw<T>(k: Call, opts: CallOptions | undefined, read: (resp: Response) => Promise<T>): Promise<T> {
    return this.withDeadline(opts, async (signal, deadline) => read(await this.send(k, signal, deadline)));
  }

  /** Runs f under the call's signal: the caller's, and the call's time bound. */
  private async withDeadline<T>(opts: CallOptions | undefined, f: (signal: AbortSignal, deadline: number) => Promise<T>): Promise<T> {
    const timeout = opts?.timeoutMs ?? this.timeoutMs;
    const signals = [AbortSignal.timeout(timeout)];
    if (opts?.signal) signals.push(opts.signal);
    const signal = AbortSignal.any(signals);
    try {
      return await f(signal, Date.now() + timeout);
    } catch (err) {
      if (opts?.signal?.aborted) throw opts.signal.reason;
      if (err instanceof DurachatError) throw err;
      if (signal.aborted) {
        throw new DurachatError({ status: 0, code: codes.unreachable, message: `no answer within ${timeout} ms`, cause: err });
      }
      throw err;
    }
  }

  /**
   * Sends k, retrying a 503 or a lost answer when k is safe to repeat, and
   * returns the first answer that is not a retried 503; its body is the
   * caller's to read.
   */
  async send(k: Call, signal: AbortSignal, deadline: number): Promise<Response> {
    let body: Uint8Array | string | undefined = k.raw;
    if (body === undefined && k.body !== undefined) body = JSON.stringify(k.body);
    let url = this.baseURL + k.path;
    const q = Object.entries(k.query ?? {}).filter((e): e is [string, string] => e[1] !== undefined);
    if (q.length) url += (url.includes("?") ? "&" : "?") + new URLSearchParams(q).toString();
    const headers: Record<string, string> = {};
    if (k.raw !== undefined) headers["content-type"] = "application/x-ndjson";
    else if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const attempts = k.retry ? this.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      let resp: Response;
      try {
        resp = await this.fetchFn(url, { method: k.method, headers, body: body as RequestInit["body"], signal });
      } catch (err) {
        if (signal.aborted) throw err;
        // No answer: the server may not have had the request, or its
        // answer was lost on the way (a dropped connection). A call safe to
        // repeat is sent again: an append repeated with its receipt logs
        // nothing twice.
        const refused = (err as { cause?: { code?: unknown } })?.cause?.code === "ECONNREFUSED"; // nothing listens: nothing was lost
        if (attempt < attempts && !refused) {
          const wait = Math.min(250 * 2 ** (attempt - 1), this.maxWaitMs);
          if (deadline - Date.now() > wait) {
            await sleep(wait, signal);
            continue;
          }
        }
        const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String((err as Error)?.message ?? err);
        throw new DurachatError({ status: 0, code: codes.unreachable, message: `${k.method} ${k.path}: ${cause}`, cause: err });
      }
      if (resp.status !== 503 || attempt >= attempts) return resp;
      const wait = Math.min(retryAfterMs(resp.headers.get("retry-after")), this.maxWaitMs);
      if (deadline - Date.now() < wait) return resp; // no time left to wait: the 503 is the answer
      await discard(resp);
      await sleep(wait, signal);
    }
  }

  /** PUTs bytes to an upload target, without the client's credential (the target's signature is one). */
  async put(target: NonNullable<UploadAnswer["upload"]>, data: Uint8Array, what: string, opts?: CallOptions): Promise<void> {
    await this.withDeadline(opts, async (signal) => {
      // Every header of the target but Content-Length, which is the body's own.
      const headers = Object.fromEntries(Object.entries(target.headers ?? {}).filter(([k]) => k.toLowerCase() !== "content-length"));
      let resp: Response;
      try {
        resp = await this.fetchFn(target.url, { method: target.method || "PUT", headers, body: data as Uint8Array<ArrayBuffer>, signal });
      } catch (err) {
        if (signal.aborted) throw err;
        const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String((err as Error)?.message ?? err);
        throw new DurachatError({ status: 0, code: codes.unreachable, message: `${what}: ${cause}`, cause: err });
      }
      if (resp.status < 200 || resp.status > 299) throw apiError(resp, await readBounded(resp, 64 * 1024, what).catch(() => new Uint8Array(0)));
      await discard(resp);
    });
  }
}

/** How long View waits: "turn" waits (at most about 20 s) until the lines are built or their builds have stalled. */
export type Wait = "" | "turn";

/** A page of the summary tree: a level (absent: the top one), the first node's index, and at most limit nodes. */
export interface TreePage {
  level?: number;
  from?: number;
  limit?: number;
}

/** Pages through a chat with messages(): after is the previous page's next; links gives each ref a signed URL. */
export interface ReadOptions {
  after?: string;
  limit?: number;
  links?: boolean;
}

/** One chat of the caller's tenant: the routes under /v1/chats/{chat}. */
export class Chat {
  constructor(
    readonly client: Client,
    readonly id: string,
  ) {}

  private path(route: string): string {
    return `/v1/chats/${encodeURIComponent(this.id)}${route}`;
  }

  /**
   * Logs pi-ai messages and returns the ids of the entries logged. Inline
   * images are stored once; the log holds their refs.
   *
   * receipt (at most 256 bytes) makes the append idempotent: a repeat with
   * the same receipt and messages returns the first ids and logs nothing
   * twice, and only then is a 503 or a lost answer retried. The same receipt with other
   * messages is a 409 (code "conflict", field "receipt"). With an empty
   * receipt the append is still all or nothing but never retried. Past the
   * body limit the messages' images are uploaded first and logged as refs
   * (the caller's messages are not changed).
   */
  async append(receipt: string, messages: readonly Message[], opts?: CallOptions): Promise<number[]> {
    const contents: Block[][] = [];
    const sent = messages.map((m) => {
      if (!Array.isArray(m?.content)) return m;
      const content = m.content.slice();
      contents.push(content);
      return { ...m, content };
    });
    const body: { messages: Message[]; receipt?: string } = { messages: sent };
    if (receipt) body.receipt = receipt;
    await this.uploadIfOver(body, contents, opts);
    const out = await this.client.call<{ ids: number[] }>({ method: "POST", path: this.path("/messages"), body, retry: receipt !== "" }, opts);
    return out.ids;
  }

  /** The memory view for the system prompt; wait "turn" waits until its lines are built (read it once per turn). */
  view(wait: Wait = "", opts?: CallOptions): Promise<View> {
    return this.client.call({ method: "GET", path: this.path("/view"), query: { wait: wait || undefined }, retry: true }, opts);
  }

  /** The memory tools to offer the model: zoom, date, and search when it is on. */
  async tools(opts?: CallOptions): Promise<ToolDef[]> {
    const out = await this.client.call<{ tools: ToolDef[] }>({ method: "GET", path: this.path("/tools"), retry: true }, opts);
    return out.tools;
  }

  /**
   * Answers a memory tool call ("zoom", "date" or "search") with the
   * model's arguments as they are. The result goes to the model like any
   * tool result (through afterTool first, so zoom's images become refs
   * again). A tool error the model should see, such as search being off,
   * is a result with isError set, not a thrown error.
   */
  callTool(name: string, args: unknown, opts?: CallOptions): Promise<ToolResult> {
    return this.client.call({ method: "POST", path: this.path(`/tools/${encodeURIComponent(name)}`), body: args ?? {}, retry: true, accept404: true }, opts);
  }

  /** Opens part of the memory: a view line's two halves, or an original entry with its images. */
  zoom(args: ZoomArgs, opts?: CallOptions): Promise<ToolResult> {
    return this.callTool("zoom", args, opts);
  }

  /** Tells when entry id was logged. */
  date(id: number, opts?: CallOptions): Promise<ToolResult> {
    return this.callTool("date", { id }, opts);
  }

  /** Finds original entries containing a text; with search off the result is a tool error saying how to turn it on. */
  search(args: SearchArgs, opts?: CallOptions): Promise<ToolResult> {
    return this.callTool("search", args, opts);
  }

  /** A stored image's bytes and type. */
  image(name: string, opts?: CallOptions): Promise<{ data: Uint8Array; type: string }> {
    const k: Call = { method: "GET", path: this.path(`/images/${encodeURIComponent(name)}`), retry: true };
    return this.client.raw(k, opts, async (resp) => {
      const data = await readBounded(resp, maxAnswer, `GET ${k.path}`);
      if (resp.status !== 200) throw apiError(resp, data);
      return { data, type: resp.headers.get("content-type") ?? "" };
    });
  }

  /** The chat's build counts and last error. */
  status(opts?: CallOptions): Promise<Status> {
    return this.client.call({ method: "GET", path: this.path("/status"), retry: true }, opts);
  }

  /** A page of one level of the chat's summary tree. */
  tree(page: TreePage = {}, opts?: CallOptions): Promise<Tree> {
    const query = {
      level: page.level === undefined ? undefined : String(page.level),
      from: page.from ? String(page.from) : undefined,
      limit: page.limit ? String(page.limit) : undefined,
    };
    return this.client.call({ method: "GET", path: this.path("/tree"), query, retry: true }, opts);
  }

  /** Changes the chat's memory settings and returns them as stored. */
  setMemorySettings(s: MemorySettings, opts?: CallOptions): Promise<MemorySettings> {
    return this.client.call({ method: "PUT", path: this.path("/memory/settings"), body: s, retry: true }, opts);
  }

  /** Asks for a target to upload an image to; most callers want upload, which also sends the bytes. */
  uploadTarget(input: UploadInput, opts?: CallOptions): Promise<UploadAnswer> {
    return this.client.call({ method: "POST", path: this.path("/uploads"), body: input, retry: true }, opts);
  }

  /**
   * Stores image bytes without them passing through a request to durachat
   * (to S3 in AWS): asks for an upload target and PUTs the bytes there,
   * unless the image is stored already. Returns the image's name, whose
   * ref block (refBlock) a host sends in place of the image; the image is
   * checked and stored when a hook or append first carries the ref.
   */
  async upload(data: Uint8Array, mimeType?: string, opts?: CallOptions): Promise<string> {
    const input = await describeImage(data, mimeType);
    const a = await this.uploadTarget(input, opts);
    if (a.stored) return a.name;
    if (!a.upload) throw new DurachatError({ status: 200, code: codes.internal, message: `upload ${input.name}: the answer has no target` });
    await this.client.put(a.upload, data, `upload ${input.name}`, opts);
    return a.name;
  }

  /**
   * When body would pass the body limit, uploads the inline images of
   * contents (the caller's copies, changed in place) and puts their ref
   * blocks in their place. Returns the names uploaded, in block order.
   */
  private async uploadIfOver(body: unknown, contents: Block[][], opts?: CallOptions): Promise<string[]> {
    const limit = this.client.bodyLimit;
    if (limit <= 0 || travelSize(JSON.stringify(body)) <= limit) return [];
    const names: string[] = [];
    for (const content of contents) {
      for (const [i, b] of content.entries()) {
        if (b?.type !== "image" || typeof b.data !== "string" || b.data === "") continue;
        let raw: Uint8Array;
        try {
          raw = fromBase64(b.data);
        } catch {
          continue; // sent as it is: the server names what is wrong
        }
        const name = await this.upload(raw, b.mimeType, opts);
        content[i] = refBlock(name);
        names.push(name);
      }
    }
    return names;
  }

  /**
   * Turns the images of a tool result into refs: call it on each result
   * before keeping, bounding or logging it. Past the body limit the
   * result's images are uploaded first and sent as refs; their names are
   * in stored like those the hook stored.
   */
  async afterTool(input: AfterToolInput, opts?: CallOptions): Promise<AfterToolResult> {
    const content = input.result.content.slice();
    const body = { ...input, result: { ...input.result, content } };
    const uploaded = input.call.nested ? [] : await this.uploadIfOver(body, [content], opts);
    const out = await this.client.call<AfterToolResult>({ method: "POST", path: this.path("/hooks/after-tool"), body, retry: true }, opts);
    return { ...out, stored: withNames(out.stored ?? [], uploaded), inline: out.inline ?? [] };
  }

  /**
   * Turns the images of a user message into refs, for a host that keeps
   * its own transcript: call it before keeping or logging the message.
   * Past the body limit its images are uploaded first.
   */
  async offloadInput(message: Message, opts?: CallOptions): Promise<OffloadInputResult> {
    const content = Array.isArray(message.content) ? message.content.slice() : message.content;
    const body = { message: { ...message, content } };
    const uploaded = Array.isArray(content) ? await this.uploadIfOver(body, [content], opts) : [];
    const out = await this.client.call<OffloadInputResult>({ method: "POST", path: this.path("/hooks/offload-input"), body, retry: true }, opts);
    return { ...out, stored: withNames(out.stored ?? [], uploaded), inline: out.inline ?? [] };
  }

  /**
   * Puts the images back into a provider request just before it is sent:
   * in user messages and tool results, each exact ref block becomes an
   * image of the request's format. It never fails a well-formed request;
   * refs it could not restore are listed in unrestored.
   */
  async beforeRequest<R = unknown>(input: BeforeRequestInput<R>, opts?: CallOptions): Promise<BeforeRequestResult<R>> {
    const out = await this.client.call<BeforeRequestResult<R>>({ method: "POST", path: this.path("/hooks/before-request"), body: input, retry: true }, opts);
    return { ...out, restored: out.restored ?? [], unrestored: out.unrestored ?? [] };
  }

  /** Reads the chat back in order, a page at a time; pages stay stable while the chat is appended to. */
  messages(o: ReadOptions = {}, opts?: CallOptions): Promise<MessagePage> {
    const query = { after: o.after || undefined, limit: o.limit ? String(o.limit) : undefined, images: o.links ? "links" : undefined };
    return this.client.call({ method: "GET", path: this.path("/messages"), query, retry: true }, opts);
  }

  /**
   * Deletes the chat: its messages, memory and state, and the images no
   * other chat of the tenant names. Idempotent; accepted says the deletion
   * goes on in the background (calling delete again resumes it). Once done,
   * the id names a new, empty chat.
   */
  async delete(opts?: CallOptions): Promise<Deletion> {
    const out = await this.client.call<Omit<Deletion, "accepted">>({ method: "DELETE", path: this.path(""), retry: true }, opts);
    return { ...out, accepted: !out.deleted };
  }

  /**
   * Erases messages of the chat for good (POST .../erase): exactly one of
   * seqs, match or images. Each message erased stays a tombstone
   * ({seq, erased} when read back), the summary lines built from it are
   * taken back and rebuilt, and the images only it showed are deleted.
   * Answers the erasure's receipt; done is false while lines are being
   * rebuilt (erasure(id) answers it again). The same request again answers
   * the same erasure, so it is retried.
   */
  erase(req: EraseRequest, opts?: CallOptions): Promise<Erasure> {
    return this.client.call({ method: "POST", path: this.path("/erase"), body: req, retry: true }, opts);
  }

  /** The receipt of erasure id of this chat (GET .../erasures/{id}). */
  erasure(id: string, opts?: CallOptions): Promise<Erasure> {
    return this.client.call({ method: "GET", path: this.path(`/erasures/${encodeURIComponent(id)}`), retry: true }, opts);
  }

  /**
   * The chat's export, JSONL, a chunk at a time: one line per logged
   * message, {"seq", "message"}, as the host logged it with its image
   * blocks inline, and the images its ref blocks name on lines of their
   * own, {"image": {"name", "mimeType", "data"}}. It follows the export's
   * parts until the last.
   */
  async *export(opts?: CallOptions): AsyncGenerator<Uint8Array> {
    let after = "";
    for (;;) {
      const k: Call = { method: "GET", path: this.path("/export"), query: { after: after || undefined }, retry: true };
      const part = await this.client.raw(k, opts, async (resp) => {
        const data = await readBounded(resp, maxAnswer, `GET ${k.path}`);
        if (resp.status !== 200) throw apiError(resp, data);
        return { data, next: resp.headers.get("durachat-export-next") ?? "" };
      });
      yield part.data;
      if (!part.next) return;
      after = part.next;
    }
  }

  /**
   * Loads an export, or a pi coding-agent session file, into the chat: the
   * file is read here (a session's last branch) and sent in parts of whole
   * lines, each logged all or nothing. Order and timestamps are kept, and
   * importing the same file again logs nothing twice, so an import that
   * fails midway (the error names the file's line and how far it got) is
   * completed by importing the file again once the cause is fixed.
   */
  async import(file: string | Uint8Array, opts?: CallOptions): Promise<ImportResult> {
    const text = typeof file === "string" ? file : new TextDecoder().decode(file);
    const parts = importParts(text);
    const total: ImportResult = { messages: 0, entries: 0, new: 0, skipped: parts.skipped };
    const byKind = (kinds: Record<string, number> | undefined) => {
      for (const [k, n] of Object.entries(kinds ?? {})) total.skippedByKind = { ...total.skippedByKind, [k]: (total.skippedByKind?.[k] ?? 0) + n };
    };
    byKind(parts.skippedByKind);
    for (const part of parts) {
      const body = await part.render(total.renamed ?? {});
      let got: ImportResult;
      try {
        got = await this.client.call<ImportResult>({ method: "POST", path: this.path("/import"), raw: new TextEncoder().encode(body), retry: true }, opts);
      } catch (err) {
        throw partError(err, part.lines, total);
      }
      total.messages += got.messages;
      total.entries += got.entries;
      total.new += got.new;
      total.skipped += got.skipped;
      byKind(got.skippedByKind);
      if (got.renamed) total.renamed = { ...total.renamed, ...got.renamed };
    }
    return total;
  }

  /** The chat's retention: its own, or its tenant's (inherited). */
  retention(opts?: CallOptions): Promise<Retention> {
    return this.client.call({ method: "GET", path: this.path("/retention"), retry: true }, opts);
  }

  /** Sets the chat's own retention in days (0 keeps the chat); null returns it to its tenant's default. */
  setRetention(days: number | null, opts?: CallOptions): Promise<Retention> {
    return this.client.call({ method: "PUT", path: this.path("/retention"), body: { days }, retry: true }, opts);
  }
}

/** Adds the names missing from stored, each once. */
function withNames(stored: string[], names: string[]): string[] {
  const out = stored.slice();
  for (const n of names) if (!out.includes(n)) out.push(n);
  return out;
}

/**
 * Makes the lines an import part's error names the file's lines (the
 * part's line n is the file's lines[n-1]) and says what the parts before
 * it logged.
 */
function partError(err: unknown, lines: number[], done: ImportResult): unknown {
  if (!(err instanceof DurachatError)) return err;
  const fileLine = (s: string) =>
    s.replace(/\bline (\d+)\b/g, (m, n) => {
      const i = Number(n);
      return i >= 1 && i <= lines.length ? `line ${lines[i - 1]}` : m;
    });
  let message = fileLine(err.detail);
  if (done.entries > 0 || done.messages > 0) {
    message += ` (the file's lines before line ${lines[0]} are imported: ${done.entries} entries)`;
  }
  return new DurachatError({
    status: err.status, code: err.code, message, field: err.field ? fileLine(err.field) : undefined,
    retryAfterMs: err.retryAfterMs, requestId: err.requestId, cause: err,
  });
}

/** The answer types by operation, for hosts that call a route this client does not wrap. */
export type { Answer };
