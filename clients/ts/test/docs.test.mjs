// The start pages' programs (docs/integrate/typescript.md and ai-sdk.md),
// as a host copies them: each is type-checked against the built package
// and run by Node 22 (which runs TypeScript as it is) against the local
// server. The AI SDK page's two marked lines (the provider and the model)
// are swapped for the ai package's mock model.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, refName } from "../dist/index.js";
import { node22, startServer, tempDir } from "./server.mjs";

const pkg = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const docs = path.join(pkg, "../../docs/integrate");
const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let data;
before(async () => {
  data = tempDir("durachat-docs-");
  server = await startServer(bin, data.dir);
});
after(async () => {
  await server?.stop();
  data?.remove();
});

/** The fenced blocks of a Markdown file: their language and text. */
function fences(file) {
  const out = [];
  let cur;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) {
      if (cur) {
        out.push(cur);
        cur = undefined;
      } else {
        cur = { lang: line.slice(3).trim(), lines: [] };
      }
    } else if (cur) {
      cur.lines.push(line);
    }
  }
  return out;
}

/** The page's one TypeScript program, and the plain block after it (what it prints). */
function program(page) {
  const blocks = fences(path.join(docs, page));
  const at = blocks.map((b, i) => (b.lang === "ts" ? i : -1)).filter((i) => i >= 0);
  assert.equal(at.length, 1, `${page} has ${at.length} TypeScript blocks, want the one program`);
  const next = blocks[at[0] + 1];
  return { source: blocks[at[0]].lines.join("\n") + "\n", printed: next && next.lang === "" ? next.lines.join("\n") + "\n" : undefined };
}

/**
 * Type-checks a program and runs it under Node 22 against the local
 * server; it sits in the package's directory, so "@durachat/client" is
 * the package itself and "ai" its dev dependency. Returns its output.
 */
function run(name, source) {
  const dir = mkdtempSync(path.join(pkg, ".docs-"));
  try {
    const file = path.join(dir, name);
    writeFileSync(file, source);
    const tsc = path.join(pkg, "node_modules/typescript/bin/tsc");
    try {
      execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--skipLibCheck", "--types", "node", file], { cwd: pkg, stdio: "pipe" });
    } catch (err) {
      assert.fail(`${name} does not type-check:\n${err.stdout}${err.stderr}`);
    }
    try {
      return execFileSync(node22(), ["--no-warnings", file], { cwd: dir, stdio: "pipe", env: { ...process.env, DURACHAT_URL: server.url, DURACHAT_TOKEN: "" } }).toString();
    } catch (err) {
      assert.fail(`${name} failed:\n${err.stdout}${err.stderr}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the TypeScript page's program runs and prints what the page says", () => {
  const { source, printed } = program("typescript.md");
  assert.ok(printed, "typescript.md shows what its program prints");
  assert.equal(run("start.mts", source), printed);
});

// The mock model of the AI SDK page's test: it calls the screenshot tool,
// then answers, and says how many images it got.
const mockModel = `import { MockLanguageModelV4 } from "ai/test";
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const model = new MockLanguageModelV4({
  doGenerate: async ({ prompt }) => {
    const images = prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).flatMap((p) => (p.type === "tool-result" && p.output.type === "content" ? p.output.value : [])).filter((v) => v.type === "file").length;
    console.log("the model got", images, "image(s)");
    if (!prompt.some((m) => m.role === "tool")) {
      return { content: [{ type: "tool-call", toolCallId: "call-1", toolName: "screenshot", input: JSON.stringify({ page: "/login" }) }], finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] };
    }
    return { content: [{ type: "text", text: "A login form." }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
  },
});`;

test("the AI SDK page's program runs with the mock model: the model gets the image, the history and the log hold its ref", async () => {
  const { source } = program("ai-sdk.md");
  const lines = source.split("\n");
  const provider = lines.findIndex((l) => l.endsWith("// your provider"));
  const model = lines.findIndex((l) => l.endsWith("// your model"));
  assert.ok(provider >= 0 && model >= 0, "ai-sdk.md marks the provider's line and the model's");
  lines[model] = mockModel;
  lines.splice(provider, 1);
  // What the program keeps, printed for the test.
  lines.push('console.log("chat", dc.chat.id);');
  lines.push('console.log("history", JSON.stringify(history));');
  const out = run("start.mts", lines.join("\n"));
  assert.match(out, /^the model got 0 image\(s\)\nthe model got 1 image\(s\)\nA login form\.\nchat start-ai-sdk-[0-9a-f-]{36}\nhistory /);
  const chatID = /^chat (\S+)$/m.exec(out)[1];
  const history = JSON.parse(out.slice(out.indexOf("history ") + "history ".length));
  const kept = JSON.stringify(history);
  assert.ok(!kept.includes("iVBORw0KGgo"), "no image in the history");
  const ref = /\[image [0-9a-f]{16}\]/.exec(kept)?.[0];
  assert.ok(ref, "the history holds the screenshot's ref");

  const logged = (await new Client(server.url).chat(chatID).messages()).messages.map((m) => m.message);
  assert.deepEqual(logged.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"]);
  assert.ok(logged[2].content.some((b) => refName(b) === ref.slice(7, -1)), "the log holds the ref");
});
