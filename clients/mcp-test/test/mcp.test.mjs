// durachat's MCP endpoint (POST /v1/mcp on `durachat serve`) driven by the
// official TypeScript SDK's client: the tools listed, an image logged and
// zoomed down to, its bytes compared, and a call without a token refused.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { png } from "../../ts/test/server.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const token = "ts-mcp-token-0123456789";
let dir, child, url;

// Starts `durachat serve` on a port the kernel picks, and reads the port
// from the server's start line.
before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "durachat-mcp-"));
  const bin = process.env.DURACHAT_BIN ?? path.join(dir, "durachat");
  if (!process.env.DURACHAT_BIN) execFileSync("go", ["build", "-o", bin, "./cmd/durachat"], { cwd: repo, stdio: "inherit" });
  child = spawn(bin, ["serve"], {
    env: { ...process.env, DURACHAT_ADDR: "127.0.0.1:0", DURACHAT_DATA: path.join(dir, "data"), DURACHAT_TOKENS: `${token}=ts` },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: child.stdout });
  url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("durachat did not start within 60 s")), 60_000);
    child.on("exit", (code) => reject(new Error(`durachat exited with ${code}`)));
    lines.on("line", (line) => {
      const rec = JSON.parse(line);
      if (rec.msg === "durachat serving") {
        clearTimeout(timer);
        resolve(`http://${rec.addr}`);
      }
    });
  });
});

after(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.on("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function connect(tok) {
  const client = new Client({ name: "ts-test-host", version: "1.0.0" });
  const headers = tok ? { Authorization: `Bearer ${tok}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(url + "/v1/mcp"), { requestInit: { headers } }));
  return client;
}

function text(res) {
  return res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError ?? false, false, `${name}: ${text(res)}`);
  return res;
}

test("a TypeScript host zooms down to a logged image and receives its bytes", async () => {
  const client = await connect(token);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["date", "log", "search", "view", "zoom"]);
    const image = png(24, 16, (x, y) => [x * 10, y * 15, 200]);
    const logged = await call(client, "log", {
      chat: "ts-demo",
      messages: [
        { role: "user", content: "Why does the login page fail?" },
        { role: "user", content: [{ type: "text", text: "The screenshot:" }, { type: "image", data: image, mimeType: "image/png" }] },
      ],
    });
    const id = JSON.parse(text(logged)).ids[1];
    let res = await call(client, "view", { chat: "ts-demo" });
    for (let depth = 0; depth < 64; depth++) {
      const block = [...text(res).matchAll(/^(\d+)\+(\d+)\|/gm)]
        .map((m) => [Number(m[1]), Number(m[2])])
        .find(([s, n]) => s <= id && id < s + n);
      assert.ok(block, `no line holds entry ${id}: ${text(res)}`);
      res = await call(client, "zoom", { chat: "ts-demo", id: block[0], n: block[1] });
      if (block[1] === 1) break;
    }
    const img = res.content.find((c) => c.type === "image");
    assert.ok(img, `no image content: ${text(res)}`);
    assert.equal(img.mimeType, "image/png");
    const sha = (b64) => createHash("sha256").update(Buffer.from(b64, "base64")).digest("hex");
    assert.equal(sha(img.data), sha(image));
  } finally {
    await client.close();
  }
});

test("the endpoint refuses a host without a token", async () => {
  await assert.rejects(connect(""));
});
