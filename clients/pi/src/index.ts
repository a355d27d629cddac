// durachat for pi: a pi coding-agent extension that keeps a session's images
// and memory in durachat. For pi 1.x (@earendil-works) and 0.73.1
// (@mariozechner): it imports nothing of pi at run time, and the events it
// uses are in both.
//
//   - tool results with images go through after-tool, so the session keeps
//     refs (a call another tool made goes as nested, and is left alone);
//   - a user's attached images go through offload-input before pi keeps
//     the message, so the session keeps their refs too;
//   - images the session still holds inline are offloaded at its start and
//     before each request, and the session file is written with their refs;
//   - each model request goes through before-request (pi format), so the
//     model sees the images again;
//   - the memory view goes into the system prompt;
//   - zoom, date, search and forget are pi tools that durachat answers
//     (search and forget when the chat turned them on);
//   - every message is logged with a receipt, and a marker in the session
//     says which ones durachat has, so a resume logs the ones it has not;
//   - past the body limit (AWS takes about 6 MB a request), images are
//     uploaded first and sent as refs;
//   - a model that takes no images gets the images' descriptions.
//
// Configured by environment: DURACHAT_URL, DURACHAT_TOKEN, DURACHAT_CHAT
// (default: one chat per pi session, pi-<session id>), DURACHAT_BODY_LIMIT
// and DURACHAT_DESCRIBE. When durachat cannot be reached the session goes on
// as pi would have it, and the extension says so once.

import { createHash } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import type { ExtensionAPI, ExtensionContext, SessionEntry, SessionMessageEntry, ToolResultEvent } from "@earendil-works/pi-coding-agent";
import { type Block, Client, DurachatError, defaultBodyLimit, type Message, type ToolDef, type ToolResult } from "@durachat/client";

export { Client, DurachatError, defaultBodyLimit, describeImage, refBlock } from "@durachat/client";
export type { Block, InlineImage, ToolDef, ToolResult, UploadAnswer, View } from "@durachat/client";

export interface DurachatOptions {
  /** The server (DURACHAT_URL; default http://127.0.0.1:8080). */
  url?: string;
  /** Its bearer token (DURACHAT_TOKEN). */
  token?: string;
  /** The chat (DURACHAT_CHAT); default pi-<session id>, so a resumed session keeps its memory. */
  chat?: string;
  /**
   * The body size in bytes past which a tool result's or a logged message's
   * images are uploaded first and sent as refs (DURACHAT_BODY_LIMIT; default
   * defaultBodyLimit, within AWS's limit); 0 never uploads.
   */
  bodyLimit?: number;
  /**
   * Whether the model gets the images' descriptions instead of the images
   * (DURACHAT_DESCRIBE=1 or 0); by default when pi's model takes no images.
   */
  describe?: boolean;
  /**
   * How long, in milliseconds, a turn waits for the messages before it to be
   * logged before it reads the view, and a session's end for its last ones
   * (default 5000): a long backlog goes on logging in the background instead
   * of holding up the agent, and what a session ends without is logged when
   * it next starts.
   */
  flushWaitMs?: number;
  /**
   * Bounds the base64 of the images put back into each model request
   * (DURACHAT_BUDGET_BYTES; default the server's, 4,500,000). When not all
   * fit, or more than 20 are named (the pi format's limit), the newest win:
   * the tool result that has just run, then the user's latest attachment,
   * then older ones from the end back; the others go as their descriptions
   * or refs.
   */
  budgetBytes?: number;
  /**
   * Told of each model request that left images out (name, reason).
   * Default: the status line says how many ("durachat: 3 older images as
   * refs (budget)"), and without a UI a warning says it once per change.
   */
  onUnrestored?: (unrestored: { name: string; reason: string }[], ctx: ExtensionContext) => void;
  /** Says that durachat cannot be reached (default: the UI's notify, else stderr). */
  warn?: (message: string, ctx: ExtensionContext) => void;
  /** Replaces the global fetch. */
  fetch?: typeof fetch;
}

/** The memory tools durachat answers (search and forget only in a chat that turned them on). */
export const memoryTools = ["zoom", "date", "search", "forget"] as const;

/** The system prompt's memory section, before the view. */
export const viewHeader =
  "## Memory\n\nThis is your memory of this chat (durachat). Each line starts with <start>+<count>; " +
  "use the zoom tool with id=<start> and n=<count> to read a line in detail, n=1 for the original message with its images.";

/** A ref block: a text block whose whole text is one "[image <name>]". */
const refText = /^\[image [0-9a-f]{16}\]$/;

function isRefBlock(b: unknown): boolean {
  const block = b as Block;
  return block?.type === "text" && typeof block.text === "string" && refText.test(block.text);
}

function hasRefs(m: any): boolean {
  return (m?.role === "user" || m?.role === "toolResult") && Array.isArray(m.content) && m.content.some(isRefBlock);
}

/** Whether a message pi keeps holds an image inline: a user message or a tool result with an image block. */
function hasInline(m: any): boolean {
  return (m?.role === "user" || m?.role === "toolResult") && Array.isArray(m.content) && m.content.some((b: Block) => b?.type === "image");
}

/** The key of a message's content in the cache of offloads: the same content, the same refs. */
function contentKey(m: any): string {
  return createHash("sha256").update(m.role).update("\n").update(JSON.stringify(m.content)).digest("hex");
}

/**
 * How much of offloaded contents (their refs and text, as JSON) a session
 * remembers, so a message still inline is not sent twice: the oldest go
 * first.
 */
const offloadCacheBytes = 4 << 20;

/**
 * The bound after-tool gets for a tool result already in the session: pi
 * bounded its text when the tool ran, so no bound applies any more.
 */
const noBound = { maxBytes: 1 << 30, maxLines: 1 << 30 };

/** How long a call may take, retries of a 503 included: the agent waits on it. */
const callTimeoutMs = 15_000;
/** How long the view may take: the server waits about 20 s for its lines. */
const viewTimeoutMs = 30_000;
/** How long a call that may upload images first (at most 16 MiB each) may take. */
const uploadTimeoutMs = 120_000;

/**
 * Writes the session file anew from its entries, whole or not at all (a
 * new file renamed over the old one). Synchronous, so none of pi's appends
 * comes between the read of the entries and the rename.
 */
function rewriteSessionFile(sm: ExtensionContext["sessionManager"]): void {
  const file = sm.getSessionFile();
  const header = sm.getHeader();
  // Not written yet: pi writes every entry, as they are now, when it first does.
  if (!file || !header || !existsSync(file)) return;
  const text = [header, ...sm.getEntries()].map((e) => JSON.stringify(e) + "\n").join("");
  const tmp = `${file}.durachat-${process.pid}.tmp`;
  try {
    // The new file has the old one's permissions.
    const fd = openSync(tmp, "w", statSync(file).mode & 0o777);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** Content blocks as pi's tools return them. */
type PiContent = ToolResultEvent["content"];

function textOf(content: Block[]): string {
  return content.filter((b) => b.type === "text").map((b) => b.text).join("\n");
}

/** The roles durachat logs; pi's own message kinds (bash runs, summaries) stay in pi. */
const loggedRoles = new Set(["user", "assistant", "toolResult"]);

/**
 * The custom type of the session entries that say durachat has every
 * message of a chat up to one: data { chat, id }, the id of that message's
 * entry.
 */
export const markerType = "durachat";

/** The receipt of one message of a chat: the same message always gets the same one. */
export function receiptOf(chat: string, message: unknown): string {
  return "pi-" + createHash("sha256").update(chat).update("\n").update(JSON.stringify(message)).digest("hex").slice(0, 40);
}

/** An on/off setting: 1 or true, 0 or false; anything else leaves the default. */
function flag(value: string | undefined): boolean | undefined {
  if (value === "1" || value === "true") return true;
  if (value === "0" || value === "false") return false;
  return undefined;
}

/** Builds the extension with explicit options; the default export reads them from the environment. */
export function durachat(options: DurachatOptions = {}) {
  return function durachatExtension(pi: ExtensionAPI): void {
    const env = process.env;
    const url = options.url ?? env.DURACHAT_URL ?? "http://127.0.0.1:8080";
    const envLimit = Number(env.DURACHAT_BODY_LIMIT || NaN); // unset or not a number: the default
    const bodyLimit = options.bodyLimit ?? (Number.isFinite(envLimit) ? envLimit : defaultBodyLimit);
    // Each call is bounded (the agent waits on it), those that may upload
    // images longer.
    const client = new Client(url, { token: options.token ?? env.DURACHAT_TOKEN, bodyLimit, fetch: options.fetch, timeoutMs: callTimeoutMs });
    const fixedChat = options.chat ?? env.DURACHAT_CHAT;
    const describe = options.describe ?? flag(env.DURACHAT_DESCRIBE);
    const flushWaitMs = options.flushWaitMs ?? 5_000;
    const envBudget = Number(env.DURACHAT_BUDGET_BYTES || NaN);
    const budgetBytes = options.budgetBytes ?? (Number.isFinite(envBudget) ? envBudget : undefined);
    let lastLeftOut = "";
    /** Tells the user what a request left out, or that it left nothing out. */
    const tellUnrestored = (left: { name: string; reason: string }[], ctx: ExtensionContext) => {
      if (options.onUnrestored) {
        if (left.length) options.onUnrestored(left, ctx);
        return;
      }
      const reasons = [...new Set(left.map((u) => u.reason))].join(", ");
      const text = left.length ? `durachat: ${left.length} image(s) left out of the model request, sent as refs or descriptions (${reasons})` : undefined;
      try {
        if (ctx.hasUI) {
          ctx.ui.setStatus("durachat", text);
          return;
        }
      } catch {
        // a context of a session that has ended
      }
      const key = left.map((u) => u.name + u.reason).join(" ");
      if (text && key !== lastLeftOut) console.warn(`${text}: ${left.map((u) => u.name).join(" ")}`);
      lastLeftOut = key;
    };

    let chat = "";
    let failing = false; // said so already, until a call works again
    const registered = new Set<string>();
    // Appends not yet accepted, in order; each carries its receipt, so a
    // repeat is safe, and the id of its session entry once known.
    const pending: { message: unknown; receipt: string; id?: string }[] = [];
    let flushing: Promise<void> = Promise.resolve();
    let session = 0; // counts session starts: a flush works for the session it began in
    // The refs of contents offloaded already, by contentKey: a message pi
    // still holds inline (its copy in the agent's state) is not sent twice.
    const offloaded = new Map<string, { content: Block[] | null; size: number }>();
    let offloadedBytes = 0;
    const offloading = new Map<string, Promise<void>>();
    // Offloads of what the session still holds inline, one at a time.
    let leftovers: Promise<void> = Promise.resolve();

    const warn = (message: string, ctx: ExtensionContext) => {
      try {
        if (options.warn) options.warn(message, ctx);
        else if (ctx.hasUI) ctx.ui.notify(message, "warning");
        else console.warn(message);
      } catch {
        console.warn(message); // a context of a session that has ended
      }
    };

    /** Whether the user cancelled; a context of a session that has ended counts as cancelled. */
    const cancelled = (ctx: ExtensionContext): boolean => {
      try {
        return ctx.signal?.aborted ?? false;
      } catch {
        return true;
      }
    };

    /** Runs a call; a failure is said once and leaves pi's way of doing things. */
    async function guarded<T>(ctx: ExtensionContext, what: string, fn: () => Promise<T>): Promise<T | undefined> {
      try {
        const r = await fn();
        failing = false;
        return r;
      } catch (err) {
        if (cancelled(ctx)) return undefined;
        if (!failing) {
          failing = true;
          const why = err instanceof Error ? err.message : String(err);
          warn(`durachat at ${url} failed (${what}: ${why}); the session goes on without it until it answers again.`, ctx);
        }
        return undefined;
      }
    }

    /**
     * The branch's messages durachat may not have, newest first: those after
     * the one the last marker of this chat names (all of them without one).
     * Only the branch's end is read.
     */
    function* unsettled(ctx: ExtensionContext): Generator<SessionMessageEntry> {
      const sm = ctx.sessionManager;
      let upTo: string | undefined;
      for (let e: SessionEntry | undefined = sm.getLeafEntry(); e; e = e.parentId ? sm.getEntry(e.parentId) : undefined) {
        if (e.id === upTo) return;
        if (e.type === "custom" && e.customType === markerType && (e.data as any)?.chat === chat) upTo ??= (e.data as any).id;
        else if (e.type === "message" && loggedRoles.has(e.message.role)) yield e;
      }
    }

    /** Records in the session that durachat has every message up to this one. */
    function mark(ctx: ExtensionContext, done: (typeof pending)[number]): void {
      try {
        const id = done.id ?? [...unsettled(ctx)].find((e) => e.message === done.message || receiptOf(chat, e.message) === done.receipt)?.id;
        if (id) pi.appendEntry(markerType, { chat, id });
      } catch {
        // A session that has ended: its next start logs these again, with their receipts.
      }
    }

    function flush(ctx: ExtensionContext): Promise<void> {
      flushing = flushing.then(async () => {
        // A session started since owns the queue now: this loop stops.
        const mine = session;
        const target = chat;
        let done: (typeof pending)[number] | undefined;
        while (pending.length > 0 && mine === session) {
          const next = pending[0];
          let refused: DurachatError | undefined;
          const ok = await guarded(ctx, "logging a message", async () => {
            try {
              return await client.chat(target).append(next.receipt, [next.message as Message], { timeoutMs: uploadTimeoutMs });
            } catch (err) {
              // A refusal of this message itself would refuse it on every
              // try and hold back every message after it: it is dropped,
              // and said. Anything else (the server down, a chat being
              // deleted, a bad token) keeps it for the next try.
              if (err instanceof DurachatError && (err.status === 400 || err.status === 413)) {
                refused = err;
                return null;
              }
              throw err;
            }
          });
          if (ok === undefined || mine !== session) break; // kept for the next try, or no longer ours
          if (refused) warn(`durachat refused a message, which is not logged (${refused.message}); the messages after it are.`, ctx);
          done = pending.shift();
        }
        if (done && mine === session) mark(ctx, done);
      });
      return flushing;
    }

    /**
     * Logs what is pending, waiting at most flushWaitMs: the rest goes on in
     * the background, and what a session ends without is logged when it
     * next starts.
     */
    async function settle(ctx: ExtensionContext): Promise<void> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([flush(ctx), new Promise((done) => (timer = setTimeout(done, flushWaitMs)))]);
      clearTimeout(timer);
    }

    /**
     * Runs an offload: undefined when durachat cannot store the images now
     * (said once, as every failure), and "refused" when the server refuses
     * them for good (an image that is not a whole image; said each time):
     * either way the images stay inline.
     */
    async function offloadCall<T>(ctx: ExtensionContext, what: string, fn: () => Promise<T>): Promise<T | "refused" | undefined> {
      let refused: DurachatError | undefined;
      const r = await guarded(ctx, `offloading ${what}`, async () => {
        try {
          return await fn();
        } catch (err) {
          if (err instanceof DurachatError && (err.status === 400 || err.status === 413)) {
            refused = err;
            return "refused" as const;
          }
          throw err;
        }
      });
      if (refused) warn(`durachat cannot store the images of ${what} (${refused.message}); they stay inline.`, ctx);
      return r;
    }

    /**
     * The content of a user message or a tool result with its images as
     * refs: offload-input or after-tool (as a call of the model's, with no
     * bound), or the refs of the same content offloaded before; each call
     * gets its own copy. Undefined when the message keeps its images:
     * durachat cannot store them now (tried again next time), or refuses
     * them (not tried again).
     */
    async function withRefs(ctx: ExtensionContext, m: any, signal?: AbortSignal): Promise<Block[] | undefined> {
      const key = contentKey(m);
      if (!offloaded.has(key)) {
        // The same content being offloaded (pi may build a request while the
        // message's own handler still offloads it): one call serves both.
        let running = offloading.get(key);
        if (!running) {
          running = offloadContent(ctx, key, m, signal).finally(() => offloading.delete(key));
          offloading.set(key, running);
        }
        await running;
      }
      const known = offloaded.get(key)?.content;
      return known ? structuredClone(known) : undefined;
    }

    /** Offloads a message's content and remembers the answer (under key) unless it is to be tried again. */
    async function offloadContent(ctx: ExtensionContext, key: string, m: any, signal?: AbortSignal): Promise<void> {
      const r = await offloadCall(ctx, m.role === "user" ? "a user message" : `a result of ${m.toolName}`, async () => {
        if (m.role === "user") {
          const a = await client.chat(chat).offloadInput({ ...m, role: "user" }, { signal, timeoutMs: uploadTimeoutMs });
          return { content: a.message.content as Block[], inline: a.inline.length };
        }
        const a = await client.chat(chat).afterTool({ call: { id: String(m.toolCallId), name: String(m.toolName) }, result: { content: m.content, isError: m.isError }, bounds: noBound }, { signal, timeoutMs: uploadTimeoutMs });
        return { content: a.skipped ? null : a.result.content, inline: a.inline.length };
      });
      // Refused images are not tried again; ones the store could not take now are.
      if (r === "refused") remember(key, null);
      else if (r && r.inline === 0) remember(key, r.content);
    }

    /** Remembers the refs of a content (null: it keeps its images). */
    function remember(key: string, content: Block[] | null): void {
      const size = JSON.stringify(content).length;
      if (size > offloadCacheBytes || offloaded.has(key)) return;
      offloaded.set(key, { content: structuredClone(content), size });
      offloadedBytes += size;
      for (const [oldest, { size: n }] of offloaded) {
        if (offloadedBytes <= offloadCacheBytes) break;
        offloaded.delete(oldest);
        offloadedBytes -= n;
      }
    }

    /**
     * Offloads the images the session still holds inline (kept while
     * durachat was down, from older sessions, or from before the extension
     * was installed) and writes the session file with their refs. Each
     * message is sent once; while durachat fails, nothing is tried.
     */
    function offloadLeftovers(ctx: ExtensionContext, signal?: AbortSignal): Promise<void> {
      const mine = session;
      leftovers = leftovers.then(async () => {
        let changed = false;
        try {
          for (const e of ctx.sessionManager.getEntries()) {
            if (mine !== session || failing || cancelled(ctx)) break;
            if (e.type !== "message" || !hasInline(e.message)) continue;
            const content = await withRefs(ctx, e.message, signal);
            if (!content) continue;
            // The entry pi holds, changed in place: its next rewrite, and
            // the agent's state where it shares the message, keep the refs.
            (e.message as any).content = content;
            changed = true;
          }
          if (changed && mine === session) rewriteSessionFile(ctx.sessionManager);
        } catch (err) {
          warn(`durachat cannot write the session's images as refs (${err instanceof Error ? err.message : String(err)}); they stay inline.`, ctx);
        }
      });
      return leftovers;
    }

    function registerTool(def: ToolDef): void {
      if (registered.has(def.name)) return;
      registered.add(def.name);
      pi.registerTool({
        name: def.name,
        label: `durachat ${def.name}`,
        description: def.description,
        parameters: def.parameters as any,
        async execute(_id, params, signal, _onUpdate, ctx) {
          const r = await guarded(ctx, def.name, () => client.chat(chat).callTool(def.name, params, { signal }));
          // pi marks a tool that throws as failed and shows the model the message.
          if (!r) throw new Error(`durachat at ${url} cannot answer ${def.name} now`);
          if (r.isError) throw new Error(textOf(r.content) || `${def.name} failed`);
          return { content: r.content as PiContent, details: {} };
        },
      });
    }

    pi.on("session_start", async (_event, ctx) => {
      // What another session left pending is that session's: its next
      // start logs it. What this session holds that durachat may not have
      // goes first, in order.
      session++;
      pending.length = 0;
      chat = fixedChat || `pi-${ctx.sessionManager.getSessionId()}`;
      try {
        const backlog = [...unsettled(ctx)].reverse();
        pending.push(...backlog.map((e) => ({ message: e.message, receipt: receiptOf(chat, e.message), id: e.id })));
      } catch (err) {
        warn(`durachat cannot read the session's messages (${err instanceof Error ? err.message : String(err)}); the ones it has not logged yet stay unlogged.`, ctx);
      }
      if (pending.length > 0) void flush(ctx);
      void offloadLeftovers(ctx);
      const defs = await guarded(ctx, "reading the memory tools", () => client.chat(chat).tools());
      if (!defs) return;
      for (const def of defs) registerTool(def);
      // Search may be on in one chat and off in another.
      const offered = new Set<string>(defs.map((d) => d.name));
      const active = pi.getActiveTools();
      const wanted = active.filter((name) => !registered.has(name) || offered.has(name));
      for (const name of offered) if (!wanted.includes(name)) wanted.push(name);
      pi.setActiveTools(wanted);
    });

    pi.on("before_agent_start", async (event, ctx) => {
      await settle(ctx);
      const view = await guarded(ctx, "reading the memory view", () => client.chat(chat).view("turn", { signal: ctx.signal, timeoutMs: viewTimeoutMs }));
      if (!view || view.lines === 0) return;
      return { systemPrompt: `${event.systemPrompt}\n\n${viewHeader}\n\n${view.view}` };
    });

    pi.on("tool_result", async (event, ctx) => {
      if (!event.content.some((b) => b.type === "image")) return;
      const result: ToolResult = { content: event.content as Block[], isError: event.isError };
      // A call another tool made (pi 1.x: a code-mode script's) reaches only
      // that tool, not the transcript: after-tool leaves it as it is.
      const nested = (event as { parentToolCallId?: string }).parentToolCallId !== undefined;
      const r = await offloadCall(ctx, `a result of ${event.toolName}`, () =>
        client.chat(chat).afterTool({ call: { id: event.toolCallId, name: event.toolName, nested }, result }, { signal: ctx.signal, timeoutMs: uploadTimeoutMs }));
      if (!r || (r !== "refused" && r.skipped)) return;
      // The message this result becomes is not offloaded again: refused
      // images stay inline, the others are these refs.
      const key = contentKey({ role: "toolResult", content: event.content });
      if (r === "refused") return void remember(key, null);
      if (r.inline.length === 0) remember(key, r.result.content);
      return { content: r.result.content as PiContent };
    });

    pi.on("context", async (event, ctx) => {
      // What the session still holds inline goes first, so the model gets
      // refs for it too: restored, or described for a model of text only.
      const messages = event.messages.slice();
      let changed = false;
      if (!failing && messages.some(hasInline)) {
        await offloadLeftovers(ctx, ctx.signal);
        for (const [i, m] of messages.entries()) {
          if (!hasInline(m) || failing) continue;
          const content = await withRefs(ctx, m, ctx.signal);
          if (!content) continue;
          messages[i] = { ...m, content } as (typeof messages)[number];
          changed = true;
        }
      }
      // The messages that hold refs, and an empty assistant message in
      // place of the assistant's in between: before-request tells the
      // newest turn (after the last assistant message) from older ones by
      // them, and needs nothing else of theirs. at is -1 for those.
      const at: number[] = [];
      const sent: unknown[] = [];
      messages.forEach((m, i) => {
        if (hasRefs(m)) {
          at.push(i);
          sent.push(m);
        } else if ((m as { role?: string }).role === "assistant" && sent.length > 0 && (sent[sent.length - 1] as { role?: string }).role !== "assistant") {
          at.push(-1);
          sent.push({ role: "assistant", content: [] });
        }
      });
      if (!at.some((i) => i >= 0)) return changed ? { messages } : undefined; // nothing to restore
      // A model that takes no images gets their descriptions.
      const input = ctx.model?.input;
      const mode = (describe ?? (Array.isArray(input) && !input.includes("image"))) ? "describe" : undefined;
      const r = await guarded(ctx, "restoring images", () =>
        client.chat(chat).beforeRequest<{ messages: unknown[] }>({ format: "pi", request: { messages: sent }, mode, budgetBytes }, { signal: ctx.signal }));
      if (!r) return changed ? { messages } : undefined;
      at.forEach((i, k) => {
        if (i >= 0) messages[i] = r.request.messages[k] as (typeof messages)[number];
      });
      tellUnrestored((r.unrestored ?? []).filter((u) => u.reason !== "describe"), ctx);
      return { messages };
    });

    pi.on("message_end", async (event, ctx) => {
      let m = event.message as any;
      if (!loggedRoles.has(m?.role)) return;
      // A user's attached images become refs before pi keeps the message
      // (pi persists it after this handler, as this handler returns it):
      // the session file never holds them inline. The input event cannot do
      // this: the images it passes on must be image blocks.
      let replaced: typeof m | undefined;
      if (m.role === "user" && hasInline(m)) {
        const content = await withRefs(ctx, m, ctx.signal);
        if (content) m = replaced = { ...m, content };
      }
      pending.push({ message: m, receipt: receiptOf(chat, m) });
      // In the background: pi persists the message after this handler.
      void flush(ctx);
      return replaced ? { message: replaced } : undefined;
    });

    pi.on("session_shutdown", async (_event, ctx) => {
      await settle(ctx);
    });
  };
}

/** The extension, configured by DURACHAT_URL, DURACHAT_TOKEN, DURACHAT_CHAT, DURACHAT_BODY_LIMIT, DURACHAT_BUDGET_BYTES and DURACHAT_DESCRIBE. */
export default durachat();
