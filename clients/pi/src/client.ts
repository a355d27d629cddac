// A small client of the durachat HTTP API: the routes the pi extension uses.

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

export interface ClientOptions {
  url: string;
  token?: string;
  /** Bounds each call but the view's wait (default 15 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** How long a view may wait for its lines: the server waits about 20 s. */
const viewTimeoutMs = 30_000;

export class Client {
  private readonly base: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ClientOptions) {
    this.base = opts.url.replace(/\/+$/, "");
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? 15_000;
    this.fetchFn = opts.fetch ?? fetch;
  }

  private chatPath(chat: string, route: string): string {
    return `/v1/chats/${encodeURIComponent(chat)}${route}`;
  }

  /** Sends one call and decodes its JSON answer. A 404 that carries a tool result is an answer. */
  async call<T>(method: string, path: string, body?: unknown, opts: { timeoutMs?: number; signal?: AbortSignal; toolResult404?: boolean } = {}): Promise<T> {
    const signals = [AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs)];
    if (opts.signal) signals.push(opts.signal);
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let resp: Response;
    try {
      resp = await this.fetchFn(this.base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.any(signals),
      });
    } catch (err) {
      const cause = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
      throw new DurachatError(`${method} ${path}: ${cause}`, 0, "unreachable");
    }
    const text = await resp.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (resp.ok || (resp.status === 404 && opts.toolResult404 && Array.isArray(json?.content))) {
      return json as T;
    }
    const e = json?.error;
    throw new DurachatError(
      `${method} ${path}: ${resp.status} ${e?.code ?? ""}: ${e?.message ?? text.slice(0, 200)}`,
      resp.status,
      e?.code ?? "http_" + resp.status,
      e?.field,
    );
  }

  /** Logs messages; the receipt makes a repeat log nothing twice. */
  async append(chat: string, messages: unknown[], receipt: string): Promise<number[]> {
    const r = await this.call<{ ids: number[] }>("POST", this.chatPath(chat, "/messages"), { messages, receipt });
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

  /** after-tool: the result's images become refs. */
  afterTool(chat: string, call: { id: string; name: string }, result: ToolResult, signal?: AbortSignal) {
    return this.call<{ result: ToolResult; stored: string[]; skipped: string | null }>(
      "POST", this.chatPath(chat, "/hooks/after-tool"), { call, result }, { signal });
  }

  /** before-request in pi format: refs become images. */
  beforeRequest(chat: string, request: { messages: unknown[] }, signal?: AbortSignal) {
    return this.call<{ request: { messages: unknown[] }; restored: string[]; unrestored: { name: string; reason: string }[] }>(
      "POST", this.chatPath(chat, "/hooks/before-request"), { format: "pi", request }, { signal });
  }
}
