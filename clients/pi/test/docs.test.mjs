// The pi start page's command (docs/integrate/pi.md), run as it is: pi
// 1.x with the extension (-e ./clients/pi) against the local server, in
// print mode with a model of a local OpenAI-compatible endpoint that
// answers once. durachat's log then holds the session's turn.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "@durachat/client";
import { modern } from "./pi.mjs";
import { startServer, tempDir } from "../../ts/test/server.mjs";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repo = path.resolve(pkgDir, "../..");
const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let endpoint;
let dir;
const asked = [];
before(async () => {
  if (!modern) return;
  dir = tempDir("durachat-pi-docs-");
  server = await startServer(bin, path.join(dir.dir, "data"));
  // The model: OpenAI chat completions, streamed, one answer.
  endpoint = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      asked.push(JSON.parse(body));
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta, finish) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "local", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: "assistant", content: "A login form." }, null));
      res.write(chunk({}, "stop"));
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((r) => endpoint.listen(0, "127.0.0.1", r));
});
after(async () => {
  await server?.stop();
  await new Promise((r) => (endpoint ? endpoint.close(r) : r()));
  dir?.remove();
});

/** The page's command line: the one that runs pi with the extension. */
function documentedCommand() {
  const text = readFileSync(path.join(repo, "docs/integrate/pi.md"), "utf8");
  const lines = text.split("\n").filter((l) => /^DURACHAT_URL=\S+ pi -e \.\/clients\/pi$/.test(l));
  assert.equal(lines.length, 1, "docs/integrate/pi.md has one command that runs pi with the extension");
  return lines[0];
}

test("the pi page's command runs a session whose turn durachat logs", { skip: !modern && "the page is for pi 1.x" }, async () => {
  const agentDir = path.join(dir.dir, "agent");
  mkdirSync(agentDir);
  writeFileSync(
    path.join(agentDir, "models.json"),
    JSON.stringify({ providers: { local: { baseUrl: `http://127.0.0.1:${endpoint.address().port}/v1`, api: "openai-completions", apiKey: "local-key", models: [{ id: "model", input: ["text", "image"] }] } } }),
  );
  // pi on PATH: pi 1.x of the extension's dev dependencies, under this Node 22.
  const shims = path.join(dir.dir, "bin");
  mkdirSync(shims);
  const cli = path.join(pkgDir, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js");
  writeFileSync(path.join(shims, "pi"), `#!/bin/sh\nexec "${process.execPath}" "${cli}" "$@"\n`, { mode: 0o755 });

  const command = documentedCommand().replace("http://127.0.0.1:8080", server.url) + " --model local/model -p 'What does the login page show?' </dev/null";
  const out = await new Promise((resolve, reject) => {
    execFile("bash", ["-c", command], {
      cwd: repo,
      timeout: 120_000,
      env: {
        ...process.env,
        PATH: `${shims}${path.delimiter}${process.env.PATH}`,
        HOME: dir.dir,
        PI_CODING_AGENT_DIR: agentDir,
        PI_CODING_AGENT_SESSION_DIR: path.join(dir.dir, "sessions"),
        PI_OFFLINE: "1",
        PI_SKIP_VERSION_CHECK: "1",
        PI_TELEMETRY: "0",
      },
    }, (err, stdout, stderr) => (err ? reject(new Error(`${command}: ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)));
  });
  assert.match(out, /A login form\./);
  assert.equal(asked.length, 1, "the model was asked once");
  const tools = (asked[0].tools ?? []).map((t) => t.function?.name);
  assert.ok(tools.includes("zoom") && tools.includes("date"), `the model is offered durachat's memory tools, not only ${tools}`);

  const client = new Client(server.url);
  const chats = (await client.chats()).chats.filter((c) => c.chat.startsWith("pi-"));
  assert.equal(chats.length, 1, "the session has its chat");
  const logged = (await client.chat(chats[0].chat).messages()).messages.map((m) => m.message);
  assert.deepEqual(logged.map((m) => m.role), ["user", "assistant"]);
  assert.equal(logged[0].content[0]?.text ?? logged[0].content, "What does the login page show?");
});
