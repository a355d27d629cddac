// What the model sees each turn through the AI SDK adapter, and what the
// log keeps: over eight turns of 1 MB screenshots the newest reaches the
// model every step and the host is told what was left out; a step logged
// again, or retried after its answer was lost, is logged once; ten zooms
// of an image store nothing new.

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, test } from "node:test";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { durachat } from "../dist/ai.js";
import { noisyPng, startServer, tempDir } from "./server.mjs";

const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let data;
before(async () => {
  data = tempDir("durachat-ai-turns-");
  server = await startServer(bin, data.dir);
});
after(async () => {
  await server?.stop();
  data?.remove();
});

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};
const call = (id, toolName, input) => ({
  content: [{ type: "tool-call", toolCallId: id, toolName, input: JSON.stringify(input) }],
  finishReason: { unified: "tool-calls", raw: "tool_use" },
  usage,
  warnings: [],
});
const answer = (text) => ({ content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "end_turn" }, usage, warnings: [] });

/** The parts of a prompt's tool results, in order. */
const toolParts = (prompt) =>
  prompt
    .filter((m) => m.role === "tool")
    .flatMap((m) => m.content)
    .flatMap((p) => (p.output?.type === "content" ? p.output.value : []))
    .filter((v) => v.type !== "text" || /^\[image /.test(v.text));

/** Every message of a chat, page after page. */
async function all(chat) {
  const out = [];
  let next = "";
  do {
    const page = await chat.messages({ after: next });
    out.push(...page.messages);
    next = page.next;
  } while (next);
  return out;
}

/** The names of the images a chat's export carries. */
async function exportedImages(chat) {
  let text = "";
  for await (const part of chat.export()) text += new TextDecoder().decode(part);
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.image)
    .map((l) => l.image.name);
}

test("over eight turns of 1 MB screenshots the model sees the newest each step, and the host is told what was left out", async () => {
  const shots = [];
  const prompts = [];
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      prompts.push(structuredClone(options.prompt));
      const last = options.prompt[options.prompt.length - 1];
      return last.role === "tool" ? answer(`seen ${shots.length}`) : call(`shot-${shots.length}`, "screenshot", {});
    },
  });
  const screenshot = tool({
    description: "Takes a screenshot of the page.",
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => {
      shots.push(noisyPng(580, 580, 100 + shots.length)); // about 1 MB of PNG
      return { png: shots[shots.length - 1] };
    },
    toModelOutput: ({ output }) => ({ type: "content", value: [{ type: "file", mediaType: "image/png", data: { type: "data", data: output.png } }] }),
  });
  const told = [];
  const dc = durachat({ url: server.url, chat: `ai-turns-${Date.now()}`, onUnrestored: (unrestored) => told.push(unrestored) });
  const history = [];
  let metadata;
  for (let turn = 0; turn < 8; turn++) {
    history.push(await dc.user(`Look at the page again (${turn}).`));
    const r = await generateText({ ...(await dc.setup({ model, tools: { screenshot } })), messages: history, stopWhen: stepCountIs(3) });
    history.push(...r.responseMessages);
    // The step after the tool ran: its screenshot is the newest part the
    // model gets, as bytes, and every older one is an image or a ref.
    const seen = toolParts(prompts[prompts.length - 1]);
    assert.equal(seen.length, turn + 1);
    assert.equal(seen[turn].type, "file", `turn ${turn}: the screenshot just taken went as ${JSON.stringify(seen[turn]).slice(0, 80)}`);
    assert.equal(seen[turn].data.data, shots[turn], `turn ${turn}: the model got other bytes than the tool returned`);
    const left = seen.filter((p) => p.type === "text");
    assert.ok(
      seen.every((p, i) => p.type === "text" || p.data.data === shots[i]),
      "an image the model got is its own",
    );
    // Newest first: what is left out is the oldest.
    assert.ok(seen.slice(0, left.length).every((p) => p.type === "text"), `turn ${turn}: an older image got in before a newer one`);
    metadata = r.steps[r.steps.length - 1].providerMetadata?.durachat;
    assert.ok(metadata, "the step's provider metadata has durachat's restoration");
    assert.equal(metadata.unrestored.length, left.length);
  }
  assert.ok(told.length > 0 && metadata.unrestored.length > 0, "eight 1 MB screenshots fit the budget: the test proves nothing");
  assert.ok(told.at(-1).every((u) => u.reason === "budget" && /^[0-9a-f]{16}$/.test(u.name)));
});

/**
 * A proxy in front of the server that passes every request, except that
 * it drops the connection of the first append once the server has
 * answered it: the answer is lost.
 */
async function losingProxy() {
  let lost = false;
  let appends = 0;
  const target = new URL(server.url);
  const proxy = http.createServer((req, res) => {
    const isAppend = req.method === "POST" && /\/messages$/.test(req.url);
    if (isAppend) appends++;
    const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      if (isAppend && !lost) {
        lost = true;
        answer.resume();
        answer.on("end", () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    req.pipe(up);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${proxy.address().port}`, appends: () => appends, close: () => new Promise((r) => proxy.close(r)) };
}

test("a step logged again, or after its answer was lost, is logged once", async () => {
  const proxy = await losingProxy();
  try {
    const chat = `ai-retry-${Date.now()}`;
    const told = [];
    const dc = durachat({ url: proxy.url, chat, onError: (_e, what) => told.push(what) });
    const user = await dc.user("the same words twice"); // its append's answer is lost, and the client sends it again
    assert.equal(proxy.appends(), 2, "the lost append was sent again");
    assert.deepEqual(told, []);
    const step = { response: { messages: [{ role: "assistant", content: [{ type: "text", text: "ok" }] }], timestamp: new Date(1_767_225_600_000) } };
    await dc.onStepEnd(step);
    await dc.onStepEnd(step); // the host retries a step it thinks failed
    await dc.log([user]); // and logs its user message again
    const logged = await all(dc.chat);
    assert.deepEqual(logged.map((m) => m.message.role), ["user", "assistant"], "each message once");
    assert.equal(logged[1].message.timestamp, 1_767_225_600_000, "a step's time is its response's");
    // The same words a second time are another message.
    await dc.user("the same words twice");
    assert.equal((await all(dc.chat)).length, 3);
  } finally {
    await proxy.close();
  }
});

test("ten zooms of a stored image, their results logged, keep one stored image", async () => {
  const shot = noisyPng(2100, 30, 5); // past the longest side kept: stored shrunk
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      const calls = options.prompt.filter((m) => m.role === "assistant").length;
      if (calls === 0) return call("shot", "screenshot", {});
      if (calls <= 10) return call(`zoom-${calls}`, "zoom", { id: 2 }); // the screenshot's result
      return answer("done");
    },
  });
  const screenshot = tool({
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => shot,
    toModelOutput: ({ output }) => ({ type: "content", value: [{ type: "file", mediaType: "image/png", data: { type: "data", data: output } }] }),
  });
  const dc = durachat({ url: server.url, chat: `ai-zooms-${Date.now()}` });
  const history = [await dc.user("Zoom into the screenshot, ten times.")];
  const r = await generateText({ ...(await dc.setup({ model, tools: { screenshot } })), messages: history, stopWhen: stepCountIs(15) });
  assert.equal(r.text, "done");
  assert.equal(r.steps.filter((s) => s.toolCalls.some((c) => c.toolName === "zoom")).length, 10);
  assert.equal((await exportedImages(dc.chat)).length, 1, "one stored image, whatever the zooms");
});
