// The AI SDK adapter in a real tool loop: generateText of the ai package
// (7.x) with its mock language model (ai/test), a screenshot tool and the
// memory tools, against the real local server. The model gets the
// screenshot and the image zoom opens; the host's history and durachat's
// log hold refs, and the log is the turn.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describeImage, fromBase64 } from "../dist/index.js";
import { durachat, fromPi } from "../dist/ai.js";
import { noisyPng, startServer, tempDir } from "./server.mjs";

const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let data;
before(async () => {
  data = tempDir("durachat-ai-loop-");
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

/** The base64 of the file parts of a prompt's tool results, in order. */
function toolImages(prompt) {
  return prompt
    .filter((m) => m.role === "tool")
    .flatMap((m) => m.content)
    .flatMap((p) => (p.output?.type === "content" ? p.output.value : []))
    .filter((v) => v.type === "file")
    .map((v) => v.data.data);
}

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

test("a screenshot loop: the model sees the images, the history and the log hold refs, zoom opens the image", async () => {
  const shot = noisyPng(64, 48, 9); // a screenshot of about 12 KB
  const name = (await describeImage(fromBase64(shot))).name;
  const prompts = [];
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      prompts.push(structuredClone(options.prompt));
      switch (prompts.length) {
        case 1:
          return call("call-1", "screenshot", {});
        case 2:
          return call("call-2", "zoom", { id: 2 }); // the screenshot's result, the turn's third entry
        default:
          return answer("The page shows noise.");
      }
    },
  });
  let shots = 0;
  const screenshot = tool({
    description: "Takes a screenshot of the page.",
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => {
      shots++;
      return { png: shot };
    },
    toModelOutput: ({ output }) => ({
      type: "content",
      value: [
        { type: "text", text: "the page" },
        { type: "file", mediaType: "image/png", data: { type: "data", data: output.png } },
      ],
    }),
  });

  // The host: about two lines of durachat.
  const dc = durachat({ url: server.url, chat: "ai-loop" });
  const history = [await dc.user("What does the page show?")];
  const r = await generateText({ ...(await dc.setup({ model, tools: { screenshot }, system: "You test pages." })), messages: history, stopWhen: stepCountIs(5) });
  history.push(...r.responseMessages);

  assert.equal(r.text, "The page shows noise.");
  assert.equal(shots, 1);
  assert.equal(prompts.length, 3);
  assert.deepEqual(Object.keys(model.doGenerateCalls[0].tools.map((t) => t.name).reduce((o, n) => ({ ...o, [n]: 1 }), {})).sort(), ["date", "screenshot", "zoom"]);
  assert.equal(prompts[0][0].role, "system");
  assert.match(prompts[0][0].content, /^You test pages\.\n\n.*durachat.*\n\n<chat>\n0\+1\|user: What does the page show\?\n<\/chat>$/, "the system prompt carries the memory view");

  // The model receives the screenshot, and in the next call zoom's image too.
  assert.deepEqual(toolImages(prompts[1]), [shot], "the screenshot reaches the model");
  assert.deepEqual(toolImages(prompts[2]), [shot, shot], "zoom returns the image");

  // The host's history holds refs, never the image.
  const kept = JSON.stringify(history);
  assert.ok(!kept.includes(shot.slice(0, 200)), "no image in the history");
  assert.ok(kept.includes(`[image ${name}]`));
  const results = history.filter((m) => m.role === "tool").flatMap((m) => m.content);
  assert.deepEqual(results[0].output, { type: "content", value: [{ type: "text", text: "the page" }, { type: "text", text: `[image ${name}]` }] });

  // durachat's log holds the turn: the user's message and each step's
  // messages, with refs, reading back as the history.
  const logged = await all(dc.chat);
  assert.deepEqual(logged.map((m) => m.message.role), ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]);
  assert.ok(!JSON.stringify(logged).includes(shot.slice(0, 200)), "no image in the log");
  assert.deepEqual(fromPi(logged.map((m) => m.message)), JSON.parse(JSON.stringify(history)), "the log reads back as the history (fields left undefined aside)");

  // The next turn's system prompt carries the memory view.
  const system = await dc.system("You test pages.");
  assert.match(system, /^You test pages\.\n\n.*durachat[\s\S]*<chat>[\s\S]*<\/chat>$/);
});

test("a tool result durachat cannot store keeps its image, and the loop goes on", async () => {
  const shot = noisyPng(16, 16, 4);
  const told = [];
  const prompts = [];
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      prompts.push(structuredClone(options.prompt));
      return prompts.length === 1 ? call("c", "screenshot", {}) : answer("ok");
    },
  });
  const dc = durachat({ url: "http://127.0.0.1:9", chat: "down", attempts: 1, onError: (_err, what) => told.push(what) });
  const screenshot = tool({
    inputSchema: jsonSchema({ type: "object", properties: {} }),
    execute: async () => shot,
    toModelOutput: ({ output }) => ({ type: "content", value: [{ type: "file", mediaType: "image/png", data: { type: "data", data: output } }] }),
  });
  const r = await generateText({ model: dc.model(model), tools: dc.tools({ screenshot }), prompt: "go", stopWhen: stepCountIs(3), onStepEnd: dc.onStepEnd });
  assert.equal(r.text, "ok");
  assert.deepEqual(toolImages(prompts[1]), [shot]);
  assert.ok(told.includes("storing the images of a screenshot result"));
  assert.ok(told.includes("logging messages"));
});
