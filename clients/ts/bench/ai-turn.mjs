// What the AI SDK adapter adds to a turn, over the bare mock model of the
// ai package: a text-only turn (the user's message logged, the view read,
// one model call, the step logged) and a screenshot turn (a tool that
// returns a 1280x800 PNG, stored once by after-tool and put back by
// before-request for the second model call). Against the local server,
// measured in one run with the bare turns as the baseline: it prints the
// medians and their ratios. Not a test: `npm run bench`.

import { execFileSync, spawnSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { buildServer, node22, png, startServer, tempDir } from "../test/server.mjs";

if (Number(process.versions.node.split(".")[0]) < 22) {
  // ai 7 needs Node 22: run again under the pinned one.
  const r = spawnSync(node22(), process.argv.slice(1), { stdio: "inherit" });
  process.exit(r.status ?? 1);
}

const { generateText, jsonSchema, stepCountIs, tool } = await import("ai");
const { MockLanguageModelV4 } = await import("ai/test");
const { durachat } = await import("../dist/ai.js");

const runs = Number(process.env.BENCH_RUNS || 40);
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const model = () =>
  new MockLanguageModelV4({
    doGenerate: async ({ prompt }) =>
      prompt.at(-1).role === "user" && prompt.at(-1).content.some((p) => p.type === "text" && p.text.startsWith("shot"))
        ? { content: [{ type: "tool-call", toolCallId: `c${performance.now()}`, toolName: "screenshot", input: "{}" }], finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] }
        : { content: [{ type: "text", text: "ok" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] },
  });
// A screenshot as a browser gives one: 1280x800, flat panels, lines of
// "text" and a photo (about 400 KB of PNG; pure noise would be 3 MB).
let seed = 7;
const shot = png(1280, 800, (x, y) => {
  if (x < 400 && y < 300) return [(seed = (seed * 1103515245 + 12345) >>> 0) >>> 24, (seed >>> 16) & 255, (seed >>> 8) & 255];
  const panel = ((x >> 7) + (y >> 6)) % 4;
  const text = y % 24 < 12 && x % 9 < 6 && (x * 7 + y * 13) % 5 !== 0;
  return text ? [30, 30, 30] : [[250, 250, 250], [235, 240, 250], [255, 245, 230], [240, 240, 240]][panel];
});
const screenshot = tool({
  inputSchema: jsonSchema({ type: "object", properties: {} }),
  execute: async () => shot,
  toModelOutput: ({ output }) => ({ type: "content", value: [{ type: "file", mediaType: "image/png", data: { type: "data", data: output } }] }),
});

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function bare(text) {
  const history = [{ role: "user", content: text }];
  await generateText({ model: model(), tools: { screenshot }, messages: history, stopWhen: stepCountIs(3) });
}

// Where an adapted turn's time goes: dc.user (offload-input when it has
// images, and the log), dc.setup (the memory tools and the view), and
// the generation (before-request before each model call, after-tool for
// the tool's result, and the log of each step).
const parts = { user: [], setup: [], generate: [] };
async function adapted(dc, history, text) {
  let t = performance.now();
  history.push(await dc.user(text));
  parts.user.push(performance.now() - t);
  t = performance.now();
  const setup = await dc.setup({ model: model(), tools: { screenshot } });
  parts.setup.push(performance.now() - t);
  t = performance.now();
  const r = await generateText({ ...setup, messages: history, stopWhen: stepCountIs(3) });
  parts.generate.push(performance.now() - t);
  history.push(...r.responseMessages);
}

const tmp = tempDir("durachat-bench-");
const server = await startServer(buildServer(tmp.dir), tmp.dir + "/data");
try {
  const results = {};
  for (const [name, text] of [["text-only", "hello"], ["screenshot", "shot please"]]) {
    const dc = durachat({ url: server.url, chat: `bench-${name}-${Date.now()}`, onUnrestored: () => {} });
    const history = [];
    const times = { bare: [], adapter: [] };
    for (let i = 0; i < runs + 5; i++) {
      // Alternate, so both see the same machine; the first five warm up.
      let t = performance.now();
      await bare(text);
      const b = performance.now() - t;
      t = performance.now();
      await adapted(dc, history, text);
      const a = performance.now() - t;
      if (i >= 5) times.bare.push(b), times.adapter.push(a);
    }
    results[name] = { bare: median(times.bare), adapter: median(times.adapter), parts: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, median(v.slice(5))])) };
    for (const v of Object.values(parts)) v.length = 0;
  }
  console.log(`AI SDK adapter, median of ${runs} turns each (Node ${process.version}):`);
  for (const [name, r] of Object.entries(results)) {
    console.log(`  ${name.padEnd(11)} bare ${r.bare.toFixed(2)} ms, with durachat ${r.adapter.toFixed(2)} ms: adds ${(r.adapter - r.bare).toFixed(1)} ms (${(r.adapter / r.bare).toFixed(1)}x the bare turn)`);
    console.log(`  ${"".padEnd(11)} of which user ${r.parts.user.toFixed(1)} ms, setup ${r.parts.setup.toFixed(1)} ms, generation ${r.parts.generate.toFixed(1)} ms`);
  }
  console.log(`  the screenshot is ${(shot.length / 1024).toFixed(0)} KB of base64; ${execFileSync("nproc").toString().trim()} cores`);
} finally {
  await server.stop();
  tmp.remove();
}
