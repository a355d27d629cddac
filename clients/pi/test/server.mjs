// The local durachat server for the tests: built once from ../../cmd/durachat
// (or DURACHAT_BIN), run on a free loopback port with its data in a
// directory that outlives a restart.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
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
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { ...process.env, DURACHAT_ADDR: `127.0.0.1:${port}`, DURACHAT_DATA: data, DURACHAT_LOG_LEVEL: "warn" };
  delete env.DURACHAT_TOKENS;
  if (tokens) env.DURACHAT_TOKENS = tokens;
  const child = spawn(bin, ["serve"], { env, stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(url + "/healthz");
      if (r.ok) break;
    } catch {}
    if (child.exitCode !== null) throw new Error(`durachat exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error("durachat did not answer /healthz within 30 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
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
