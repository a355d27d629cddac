// The AI SDK prompt as pi-ai messages and back (src/prompt.ts), both ways:
// every part of every role comes back as it was, through JSON and through
// the real server's before-request, and the refs before-request puts
// images in place of come back as file parts of the images' bytes.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, fromBase64, refBlock } from "../dist/index.js";
import { durachat, fromPi, toPi } from "../dist/ai.js";
import { png, startServer, tempDir } from "./server.mjs";

const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let data;
before(async () => {
  data = tempDir("durachat-ai-prompt-");
  server = await startServer(bin, data.dir);
});
after(async () => {
  await server?.stop();
  data?.remove();
});

const shot = png(3, 2, [250, 0, 0]);

/** A prompt with every part a LanguageModelV4 prompt has, refs in the places before-request restores. */
function richPrompt(ref) {
  return [
    { role: "system", content: "You test.", providerOptions: { anthropic: { cacheControl: { type: "ephemeral" } } } },
    {
      role: "user",
      content: [
        { type: "text", text: "look at these", providerOptions: { x: { y: 1 } } },
        { type: "file", mediaType: "image/png", data: { type: "data", data: fromBase64(shot) } },
        { type: "file", mediaType: "image/png", filename: "a.png", data: { type: "data", data: shot } },
        { type: "file", mediaType: "application/pdf", filename: "r.pdf", data: { type: "data", data: new Uint8Array([37, 80, 68, 70]) } },
        { type: "file", mediaType: "image/png", data: { type: "url", url: new URL("https://example.com/x.png") } },
        { type: "text", text: `[image ${ref}]` },
        { type: "text", text: `see [image ${ref}] above` },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "hmm", providerOptions: { a: { signature: "s" } } },
        { type: "text", text: "calling" },
        { type: "tool-call", toolCallId: "c1", toolName: "shot", input: { w: 1, tags: ["a"] } },
        { type: "tool-call", toolCallId: "c2", toolName: "web", input: {}, providerExecuted: true },
        { type: "file", mediaType: "image/png", data: { type: "data", data: shot } },
        { type: "custom", kind: "acme.note" },
      ],
    },
    {
      role: "tool",
      content: [
        { type: "tool-result", toolCallId: "c1", toolName: "shot", output: { type: "content", value: [{ type: "text", text: `[image ${ref}]` }, { type: "file", mediaType: "image/png", data: { type: "data", data: shot } }, { type: "file-url", url: "https://example.com/y" }] } },
        { type: "tool-result", toolCallId: "c2", toolName: "web", output: { type: "json", value: { a: [1, 2], b: null } }, providerOptions: { p: { q: 1 } } },
        { type: "tool-result", toolCallId: "c3", toolName: "e", output: { type: "error-text", value: "boom" } },
        { type: "tool-result", toolCallId: "c4", toolName: "d", output: { type: "execution-denied" } },
        { type: "tool-result", toolCallId: "c5", toolName: "d", output: { type: "execution-denied", reason: "no" } },
        { type: "tool-result", toolCallId: "c6", toolName: "t", output: { type: "text", value: `[image ${ref}]` } },
        { type: "tool-approval-response", approvalId: "ap1", approved: true },
      ],
    },
    { role: "tool", content: [{ type: "tool-result", toolCallId: "c7", toolName: "t", output: { type: "error-json", value: { code: 1 } } }] },
    { role: "assistant", content: [{ type: "text", text: "done" }] },
  ];
}

/**
 * The same prompt as before-request gives it back: the exact refs are the
 * image, as file parts that carry its stored name (so that offloading one
 * again stores nothing new).
 */
function restoredPrompt(ref) {
  const p = richPrompt(ref);
  const file = { type: "file", mediaType: "image/png", data: { type: "data", data: shot }, providerOptions: { durachat: { name: ref } } };
  p[1].content[5] = file;
  p[3].content[0].output.value[0] = file;
  p[3].content[5].output = { type: "content", value: [file] };
  return p;
}

test("a prompt goes to pi-ai messages and back as it was, through JSON too", () => {
  const prompt = richPrompt("0123456789abcdef");
  const pi = toPi(prompt);
  assert.deepEqual(pi.map((m) => m.role), ["assistant", "user", "assistant", "toolResult", "toolResult", "toolResult", "toolResult", "toolResult", "toolResult", "toolResult", "toolResult", "assistant"]);
  assert.deepEqual(pi[1].content[1], { type: "image", data: shot, mimeType: "image/png", aiSdk: pi[1].content[1].aiSdk }, "an inline image is pi's image block");
  assert.deepEqual(pi[1].content[5], { type: "text", text: "[image 0123456789abcdef]" }, "a ref is a text block of its own");
  assert.deepEqual(pi[2].content[2], { type: "toolCall", id: "c1", name: "shot", arguments: { w: 1, tags: ["a"] } });
  assert.equal(pi[3].toolCallId, "c1");
  assert.deepEqual(fromPi(pi), prompt);
  assert.deepEqual(fromPi(JSON.parse(JSON.stringify(pi))), prompt);
});

test("through before-request, the refs come back as images and the rest as it was", async () => {
  const chat = new Client(server.url).chat("ai-prompt");
  const o = await chat.offloadInput({ role: "user", content: [{ type: "image", data: shot, mimeType: "image/png" }] });
  const ref = o.stored[0];
  assert.deepEqual(o.message.content, [refBlock(ref)]);
  const r = await chat.beforeRequest({ format: "pi", request: { messages: toPi(richPrompt(ref)) } });
  assert.deepEqual(r.restored, [ref]);
  assert.deepEqual(fromPi(r.request.messages), restoredPrompt(ref));
});

test("the middleware restores only the messages that hold refs, and leaves a prompt without refs alone", async () => {
  const chat = new Client(server.url).chat("ai-middleware");
  const ref = (await chat.offloadInput({ role: "user", content: [{ type: "image", data: shot, mimeType: "image/png" }] })).stored[0];
  let posts = 0;
  const counting = (url, init) => {
    if (String(url).endsWith("/hooks/before-request")) posts++;
    return fetch(url, init);
  };
  const dc = durachat({ url: server.url, chat: "ai-middleware", fetch: counting });
  const params = { prompt: richPrompt(ref), maxOutputTokens: 10 };
  const out = await dc.middleware.transformParams({ type: "generate", params, model: {} });
  assert.deepEqual(out.prompt, restoredPrompt(ref));
  assert.equal(out.maxOutputTokens, 10);
  assert.equal(posts, 1);
  const plain = { prompt: [{ role: "user", content: [{ type: "text", text: "hi" }] }] };
  assert.equal(await dc.middleware.transformParams({ type: "generate", params: plain, model: {} }), plain);
  assert.equal(posts, 1, "no refs: no call");
});

test("when durachat cannot answer, the call goes on with refs as text, and the host is told", async () => {
  const told = [];
  const dc = durachat({ url: "http://127.0.0.1:9", chat: "x", attempts: 1, onError: (err, what) => told.push(what) });
  const params = { prompt: [{ role: "user", content: [{ type: "text", text: "[image 0123456789abcdef]" }] }] };
  assert.equal(await dc.middleware.transformParams({ type: "generate", params, model: {} }), params);
  assert.deepEqual(told, ["restoring images"]);
});

test("a Node or an ai the adapter cannot serve is named with the version it needs", async () => {
  const { unsupported } = await import("../dist/ai.js");
  assert.equal(unsupported("v22.19.0", "7.0.185"), "");
  assert.match(unsupported("v20.20.2", "6.0.333"), /needs Node 22 or later .* not Node v20\.20\.2: install Node 22, then `npm install ai@7`/);
  assert.match(unsupported("v22.19.0", "6.0.333"), /needs the ai package 7\.x, not 6\.0\.333: `npm install ai@7`/);
  assert.equal(unsupported(undefined, undefined), "", "a runtime that says neither is let through");
});
