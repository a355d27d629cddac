// durachat for the Vercel AI SDK (the ai package, 7.x): a language-model
// middleware that puts the images back before every model call, tools
// whose results keep refs in place of images, the memory view for the
// system prompt, the memory tools, and the log of each step.
//
//   const dc = durachat({ url: process.env.DURACHAT_URL, chat: "demo" });
//   const r = await generateText({ ...await dc.setup({ model, tools, system }), messages, stopWhen: stepCountIs(5) });
//
// The host's own history (result.responseMessages) then holds refs, not
// images: a screenshot is stored once, and the model still sees it.

import { createRequire } from "node:module";
import { jsonSchema, wrapLanguageModel } from "ai";
import type { LanguageModelMiddleware, ModelMessage, Tool, ToolSet, UserModelMessage } from "ai";
import { Chat, Client, type ClientOptions, DurachatError } from "./client.js";
import { fromPi, holdsRef, metaKey, outputToPi, piToOutput, type SdkMessage, type SdkPart, toPi } from "./prompt.js";
import type { Block, Message, Mode, Unrestored } from "./types.js";

export { fromPi, toPi } from "./prompt.js";

/** The model a middleware wraps: what wrapLanguageModel takes. */
type Model = Parameters<typeof wrapLanguageModel>[0]["model"];
type CallOptions = Parameters<NonNullable<LanguageModelMiddleware["transformParams"]>>[0]["params"];
type ToolOutput = Parameters<NonNullable<Tool["toModelOutput"]>>[0] extends unknown ? Awaited<ReturnType<NonNullable<Tool["toModelOutput"]>>> : never;

export interface DurachatOptions extends ClientOptions {
  /** The server (default DURACHAT_URL, else http://127.0.0.1:8080). */
  url?: string;
  /** The chat: the host's own id for the conversation. */
  chat: string;
  /** A client to use instead of one made from url and the client options. */
  client?: Client;
  /**
   * How before-request puts images back: "inline" (the default), "url", or
   * "describe" for a model that takes no images (their descriptions).
   */
  mode?: Mode;
  /** Bounds the base64 before-request inlines (default the server's). */
  budgetBytes?: number;
  /**
   * Told of a call that failed while durachat could not answer: the model
   * call goes on with refs as text, a tool result keeps its images, a
   * step is not logged. Default: a warning on the console, once until a
   * call works again.
   */
  onError?: (err: unknown, what: string) => void;
  /**
   * Told of every model call whose request left images out: when they do
   * not all fit the inline budget (budgetBytes) or the image limit (20 a
   * request in the pi format the middleware speaks), before-request keeps
   * the newest (the tool result that has just run, then the user's latest
   * attachment, then older ones from the end back) and the others go as
   * their description or their ref. Each left out is listed with its
   * reason; the same list is in the call's provider metadata, under
   * "durachat". Default: a warning on the console.
   */
  onUnrestored?: (unrestored: Unrestored[], restored: string[]) => void;
}

/** What the middleware adds to a call's provider metadata, under "durachat". */
export interface RestorationMetadata {
  [key: string]: string[] | { name: string; reason: string }[];
  restored: string[];
  unrestored: { name: string; reason: string }[];
}

/** What setup() gives generateText or streamText: the wrapped model, the tools, the system prompt, the step log. */
export interface Setup<TOOLS extends ToolSet> {
  model: Model;
  tools: TOOLS & ToolSet;
  system: string;
  onStepEnd: (step: { response: { messages: ModelMessage[]; timestamp?: Date } }) => Promise<void>;
}

/** The system prompt's part that introduces the memory view. */
export const viewHeader =
  "Below is your memory of this conversation (durachat): each line summarizes numbered entries. Use the zoom tool to open a line or an entry (with its images), date to tell when one was logged, and search, when offered, to find text.";

function env(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}

/**
 * Why this runtime cannot run the adapter, or "" when it can: the adapter
 * speaks the AI SDK 7 middleware (specification v4), and ai 7 needs Node
 * 22. Found at once, with the versions to install, rather than as an
 * error of the ai package deep in a call.
 */
export function unsupported(nodeVersion: string | undefined, aiVersion: string | undefined): string {
  const major = (v: string | undefined) => Number(/^v?(\d+)\./.exec(v ?? "")?.[1] ?? NaN);
  if (nodeVersion !== undefined && major(nodeVersion) < 22) {
    return `@durachat/client/ai needs Node 22 or later (the ai package 7.x does), not Node ${nodeVersion}: install Node 22, then \`npm install ai@7\``;
  }
  if (aiVersion !== undefined && major(aiVersion) !== 7) {
    return `@durachat/client/ai needs the ai package 7.x, not ${aiVersion}: \`npm install ai@7\` (under Node 22 or later)`;
  }
  return "";
}

function aiVersion(): string | undefined {
  try {
    return (createRequire(import.meta.url)("ai/package.json") as { version?: string }).version;
  } catch {
    return undefined; // a bundle without package files: nothing to tell
  }
}

/** durachat for one chat of an AI SDK host. */
export function durachat(options: DurachatOptions) {
  const why = unsupported((globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node, aiVersion());
  if (why) throw new Error(why);
  const client = options.client ?? new Client(options.url ?? env("DURACHAT_URL") ?? "http://127.0.0.1:8080", { token: env("DURACHAT_TOKEN"), ...options });
  const chat = client.chat(options.chat);
  let failing = false;
  const onError =
    options.onError ??
    ((err: unknown, what: string) => {
      if (failing) return;
      console.warn(`durachat at ${client.baseURL} cannot answer (${what}): ${err instanceof Error ? err.message : String(err)}`);
    });

  /** Runs a call; an error answer or an outage of durachat is told and gives undefined. */
  async function guarded<T>(what: string, f: () => Promise<T>): Promise<T | undefined> {
    try {
      const r = await f();
      failing = false;
      return r;
    } catch (err) {
      // A refusal too (an image that is not whole, a message too large):
      // the host's call goes on without durachat, and is told.
      if (!(err instanceof DurachatError)) throw err;
      onError(err, what);
      failing = true;
      return undefined;
    }
  }

  /**
   * The middleware: before every model call, the messages that hold refs
   * go through before-request and come back with the images (the others
   * are not sent). When durachat cannot answer, the call goes on with the
   * refs as text.
   */
  const onUnrestored =
    options.onUnrestored ??
    ((unrestored: Unrestored[]) => {
      const reasons = [...new Set(unrestored.map((u) => u.reason))].join(", ");
      console.warn(`durachat: ${unrestored.length} image(s) left out of the model call (${reasons}), sent as their descriptions or refs: ${unrestored.map((u) => u.name).join(" ")}`);
    });
  // What each restored call's params left out, for its provider metadata.
  const restorations = new WeakMap<object, RestorationMetadata>();
  const withMetadata = <T extends { providerMetadata?: unknown }>(params: object, o: T): T => {
    const m = restorations.get(params);
    return m ? { ...o, providerMetadata: { ...(o.providerMetadata as object | undefined), durachat: m } } : o;
  };

  const middleware: LanguageModelMiddleware = {
    specificationVersion: "v4",
    async transformParams({ params }) {
      const prompt = params.prompt as unknown as SdkMessage[];
      if (!prompt.some(holdsRef)) return params;
      // The messages that hold refs, and an empty assistant message in
      // place of the assistant's in between: before-request tells the
      // newest turn (after the last assistant message) from older ones by
      // them, and needs nothing else of theirs.
      const sent: Message[] = [];
      const from: { at: number; count: number }[] = [];
      prompt.forEach((m, i) => {
        if (holdsRef(m)) {
          const pi = toPi([m]);
          from.push({ at: i, count: pi.length });
          sent.push(...(pi as Message[]));
        } else if (m.role === "assistant" && sent.length > 0 && sent[sent.length - 1].role !== "assistant") {
          from.push({ at: -1, count: 1 });
          sent.push({ role: "assistant", content: [] } as unknown as Message);
        }
      });
      const r = await guarded("restoring images", () =>
        chat.beforeRequest<{ messages: Message[] }>(
          { format: "pi", request: { messages: sent }, mode: options.mode, budgetBytes: options.budgetBytes },
          { signal: params.abortSignal },
        ),
      );
      if (!r) return params;
      const restored = prompt.slice();
      let k = 0;
      for (const { at, count } of from) {
        if (at >= 0) restored[at] = fromPi(r.request.messages.slice(k, k + count) as Message[])[0];
        k += count;
      }
      const out = { ...params, prompt: restored as unknown as CallOptions["prompt"] };
      const left = r.unrestored ?? [];
      const unrestored = left.map((u) => ({ name: u.name, reason: u.reason }));
      restorations.set(out, { restored: [...(r.restored ?? [])], unrestored });
      if (unrestored.length > 0) onUnrestored(left, r.restored ?? []);
      return out;
    },
    async wrapGenerate({ doGenerate, params }) {
      return withMetadata(params, await doGenerate());
    },
    async wrapStream({ doStream, params }) {
      const r = await doStream();
      if (!restorations.has(params)) return r;
      const stream = r.stream.pipeThrough(
        new TransformStream({
          transform(part, controller) {
            controller.enqueue(part.type === "finish" ? withMetadata(params, part) : part);
          },
        }),
      );
      return { ...r, stream };
    },
  };

  /**
   * Wraps a tool so its results go through after-tool: its output, as the
   * model would get it (its toModelOutput, else text or JSON), comes back
   * with refs in place of images. The wrapped tool's output is that model
   * output, so the host's history holds refs; the model gets the images
   * back from the middleware.
   */
  function wrapTool<T extends Tool>(name: string, t: T): T {
    const execute = t.execute;
    if (!execute) return t;
    const toModel = t.toModelOutput;
    const wrapped = {
      ...t,
      async execute(input: unknown, opts: { toolCallId: string; abortSignal?: AbortSignal }) {
        let output: unknown = await (execute as (i: unknown, o: unknown) => unknown)(input, opts);
        if (output && typeof (output as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
          let last: unknown;
          for await (const o of output as AsyncIterable<unknown>) last = o;
          output = last;
        }
        const model: ToolOutput = toModel
          ? await toModel({ toolCallId: opts.toolCallId, input, output } as Parameters<NonNullable<Tool["toModelOutput"]>>[0])
          : typeof output === "string"
            ? { type: "text", value: output }
            : { type: "json", value: (output ?? null) as never };
        return afterTool(name, opts.toolCallId, model as unknown as { type: string }, opts.abortSignal);
      },
      toModelOutput: ({ output }: { output: unknown }) => output as ToolOutput,
    };
    return wrapped as unknown as T;
  }

  /** A model output through after-tool, as a model output with refs (as it was when durachat cannot answer). */
  async function afterTool(name: string, id: string, output: { type: string }, signal?: AbortSignal): Promise<ToolOutput> {
    const r = outputToPi(output);
    if (!r.content.some((b) => b.type === "image")) return output as ToolOutput;
    const a = await guarded(`storing the images of a ${name} result`, () =>
      chat.afterTool({ call: { id, name }, result: { content: r.content as Block[], isError: r.isError } }, { signal }),
    );
    if (!a) return output as ToolOutput;
    return piToOutput(a.result.content as Block[], a.result.isError === true, r.meta) as ToolOutput;
  }

  /** The memory tools (zoom, date, and search when it is on) as AI SDK tools; zoom's images come back as refs. */
  async function memoryTools(): Promise<ToolSet> {
    const defs = await guarded("reading the memory tools", () => chat.tools());
    const tools: ToolSet = {};
    for (const def of defs ?? []) {
      tools[def.name] = {
        description: def.description,
        inputSchema: jsonSchema(def.parameters as Parameters<typeof jsonSchema>[0]),
        async execute(args: unknown, opts: { toolCallId: string; abortSignal?: AbortSignal }) {
          const r = await chat.callTool(def.name, args, { signal: opts.abortSignal });
          const output = piToOutput(r.content, r.isError === true, { output: "content" });
          if (r.isError) return { type: "error-text", value: r.content.map((b) => (b.type === "text" ? b.text : "")).join("\n") } as ToolOutput;
          return afterTool(def.name, opts.toolCallId, output);
        },
        toModelOutput: ({ output }: { output: unknown }) => output as ToolOutput,
      } as Tool;
    }
    return tools;
  }

  /** The system prompt with the memory view after it (once the view has lines), waiting for the view's lines to be built. */
  async function system(prompt = "", signal?: AbortSignal): Promise<string> {
    const v = await guarded("reading the memory view", () => chat.view("turn", { signal, timeoutMs: 30_000 }));
    if (!v || !v.lines) return prompt;
    return `${prompt ? prompt + "\n\n" : ""}${viewHeader}\n\n${v.view}`;
  }

  /**
   * Logs messages (ModelMessage values; system messages are left out) in
   * durachat with a receipt made of the chat and the messages alone, so
   * logging the same messages again (a retry after a lost answer) logs
   * nothing twice. A message's time is the one user() stamped on it (its
   * providerOptions.durachat.timestamp), else `timestamp` (onStepEnd gives
   * the step's response time), else none: a clock read here would make a
   * retry another step. Images still inline are stored once; the log
   * holds their refs.
   */
  async function log(messages: readonly ModelMessage[], signal?: AbortSignal, timestamp?: number): Promise<number[] | undefined> {
    const pi = toPi(messages as unknown as SdkMessage[])
      .map((m, i) => ({ m, at: stampOf(messages[i]) ?? timestamp }))
      .filter(({ m }) => (m[metaKey] as { role?: string } | undefined)?.role !== "system")
      .map(({ m, at }) => (at === undefined ? m : { ...m, timestamp: at }));
    if (pi.length === 0) return [];
    const receipt = await digest(`${options.chat}\n${JSON.stringify(pi)}`);
    return guarded("logging messages", () => chat.append(receipt, pi, { signal }));
  }

  /**
   * A user message with its images stored and replaced by refs (through
   * offload-input), logged: what the host keeps in its history and sends.
   * When durachat cannot answer it comes back as it was, unlogged.
   */
  async function user(message: UserModelMessage | string, signal?: AbortSignal): Promise<UserModelMessage> {
    const given: UserModelMessage = typeof message === "string" ? { role: "user", content: message } : message;
    // Stamped once, on the message: the host keeps it so, and logging it
    // again is the same message.
    const m: UserModelMessage =
      stampOf(given) === undefined ? { ...given, providerOptions: { ...given.providerOptions, durachat: { timestamp: Date.now() } } } : given;
    const [pi] = toPi([m as unknown as SdkMessage]);
    let kept = m;
    if (Array.isArray(pi.content) && pi.content.some((b) => b.type === "image")) {
      const a = await guarded("storing the images of a user message", () => chat.offloadInput(pi, { signal }));
      if (a) kept = fromPi([a.message])[0] as unknown as UserModelMessage;
    }
    await log([kept], signal);
    return kept;
  }

  /** Logs a step's messages (the assistant's, and the tool results with refs): give it as onStepEnd. */
  async function onStepEnd(step: { response: { messages: readonly ModelMessage[]; timestamp?: Date } }): Promise<void> {
    await log(step.response.messages, undefined, step.response.timestamp?.getTime());
  }

  /** Wraps every tool of a set (wrapTool). */
  function tools<T extends ToolSet>(set: T): T {
    return Object.fromEntries(Object.entries(set).map(([name, t]) => [name, wrapTool(name, t)])) as T;
  }

  return {
    client,
    chat: chat as Chat,
    middleware,
    /** The model with the middleware. */
    model: (model: Model) => wrapLanguageModel({ model, middleware }),
    tools,
    wrapTool,
    memoryTools,
    system,
    user,
    log,
    onStepEnd,
    /**
     * All of it for generateText or streamText: the wrapped model, the
     * host's tools wrapped and the memory tools, the system prompt with the
     * memory view, and the step log.
     */
    async setup<TOOLS extends ToolSet>(o: { model: Model; tools?: TOOLS; system?: string; signal?: AbortSignal }): Promise<Setup<TOOLS>> {
      const [memory, sys] = await Promise.all([memoryTools(), system(o.system ?? "", o.signal)]);
      return {
        model: wrapLanguageModel({ model: o.model, middleware }),
        tools: { ...tools(o.tools ?? ({} as TOOLS)), ...memory } as TOOLS & ToolSet,
        system: sys,
        onStepEnd,
      };
    },
  };
}

/** The time user() stamped on a message, if any. */
function stampOf(m: unknown): number | undefined {
  const t = (m as { providerOptions?: { durachat?: { timestamp?: unknown } } } | undefined)?.providerOptions?.durachat?.timestamp;
  return typeof t === "number" && Number.isFinite(t) ? t : undefined;
}

/** A receipt: the first 32 hex digits of the SHA-256 of text. */
async function digest(text: string): Promise<string> {
  const sum = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return "ai-" + Array.from(new Uint8Array(sum).subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
}

export type { SdkMessage, SdkPart };
