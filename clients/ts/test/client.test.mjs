// The client against the real local server (built from cmd/durachat):
// every route it wraps, its typed errors, its retries of a 503 and its
// uploads past the body limit.

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { Client, DurachatError, describeImage, isUnavailable, refBlock, refName, retryAfterMs, fromBase64, toBase64 } from "../dist/index.js";
import { noisyPng, png, startServer, tempDir } from "./server.mjs";

const bin = process.env.DURACHAT_BIN;
if (!bin) throw new Error("DURACHAT_BIN is unset: run the tests with npm test (test/run.mjs builds the server)");

let server;
let data;
before(async () => {
  data = tempDir("durachat-ts-");
  server = await startServer(bin, data.dir);
});
after(async () => {
  await server?.stop();
  data?.remove();
});

const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 1767225600000 });
/** Every message of a chat, page after page. */
async function all(chat) {
  const out = [];
  let after = "";
  do {
    const page = await chat.messages({ after });
    out.push(...page.messages);
    after = page.next;
  } while (after);
  return out;
}

const image = (b64) => ({ type: "image", data: b64, mimeType: "image/png" });

/**
 * A proxy in front of the server that answers what answer() says (a
 * status and headers), else forwards; it records each request's method
 * and path.
 */
async function proxy(target, answer) {
  const seen = [];
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    seen.push({ method: req.method, path: req.url, at: Date.now(), auth: req.headers.authorization, bytes: body.length });
    const a = answer(req, seen.length);
    if (a) {
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body ?? "");
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    const r = await fetch(target + req.url, { method: req.method, headers, body: body.length ? body : undefined });
    res.writeHead(r.status, Object.fromEntries(r.headers));
    res.end(Buffer.from(await r.arrayBuffer()));
  });
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen, close: () => new Promise((r) => srv.close(r)) };
}

describe("the routes", () => {
  test("an append with a receipt logs once and reads back as sent", async () => {
    const c = new Client(server.url);
    const chat = c.chat("ts-append");
    const msgs = [user("Why does the login page fail?"), { role: "assistant", content: [{ type: "text", text: "The token expired." }], timestamp: 1767225601000, usage: { input: 3, output: 4 } }];
    const ids = await chat.append("turn-1", msgs);
    assert.deepEqual(ids, [0, 1]);
    assert.deepEqual(await chat.append("turn-1", msgs), ids, "a repeat with the receipt logs nothing twice");
    await assert.rejects(chat.append("turn-1", [user("other")]), (e) => e instanceof DurachatError && e.status === 409 && e.code === "conflict" && e.field === "receipt");
    const page = await chat.messages();
    assert.deepEqual(page.messages.map((m) => m.message), msgs, "every field reads back as sent");
    assert.deepEqual(page.messages.map((m) => m.seq), [0, 1]);
  });

  test("the memory: view, tools, zoom, date, search, settings, status and tree", async () => {
    const chat = new Client(server.url).chat("ts-memory");
    await chat.append("m1", [{ role: "user", content: [{ type: "text", text: "look" }, image(png(2, 2, [200, 10, 10]))], timestamp: 1767225600000 }]);
    const view = await chat.view("turn");
    assert.match(view.view, /^<chat>\n[\s\S]*<\/chat>$/);
    const tools = await chat.tools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["date", "zoom"]);
    assert.equal(tools.find((t) => t.name === "zoom").parameters.type, "object");
    const zoom = await chat.zoom({ id: 0 });
    const img = zoom.content.find((b) => b.type === "image");
    assert.ok(img, "zoom returns the entry's image");
    assert.equal(img.data, png(2, 2, [200, 10, 10]));
    const date = await chat.date(0);
    assert.match(date.content[0].text, /2026-01-01/);
    const off = await chat.search({ text: "look" });
    assert.equal(off.isError, true, "with search off, search is a tool error for the model");
    assert.deepEqual(await chat.setMemorySettings({ search: true }), { search: true });
    const hit = await chat.search({ text: "look" });
    assert.notEqual(hit.isError, true);
    assert.ok((await chat.tools()).some((t) => t.name === "search"));
    const status = await chat.status();
    assert.equal(status.entries, 1);
    const tree = await chat.tree();
    assert.ok(Array.isArray(tree.nodes));
    const stored = (await chat.messages()).messages[0].message.content[1];
    const name = refName(stored);
    assert.ok(name, "the log holds a ref");
    const got = await chat.image(name);
    assert.equal(got.type, "image/png");
    assert.equal(toBase64(got.data), png(2, 2, [200, 10, 10]));
  });

  test("the hooks: after-tool, offload-input and before-request", async () => {
    const chat = new Client(server.url).chat("ts-hooks");
    const shot = png(3, 3, [1, 2, 3]);
    const a = await chat.afterTool({ call: { id: "t1", name: "screenshot" }, result: { content: [{ type: "text", text: "here" }, image(shot)], isError: false } });
    assert.equal(a.result.content[1].text, `[image ${a.stored[0]}]`);
    assert.equal(a.stored[0], (await describeImage(fromBase64(shot))).name, "the name is the one describeImage gives");
    const nested = await chat.afterTool({ call: { id: "t2", name: "x", nested: true }, result: { content: [image(shot)] } });
    assert.equal(nested.skipped, "nested");
    const o = await chat.offloadInput({ role: "user", content: [image(png(1, 1, [9, 9, 9]))] });
    assert.deepEqual(o.message.content, [refBlock(o.stored[0])]);
    const r = await chat.beforeRequest({ format: "pi", request: { messages: [{ role: "user", content: [refBlock(a.stored[0])] }] } });
    assert.deepEqual(r.restored, [a.stored[0]]);
    assert.equal(r.request.messages[0].content[0].data, shot);
    const described = await chat.beforeRequest({ format: "pi", mode: "describe", request: { messages: [{ role: "user", content: [refBlock(a.stored[0])] }] } });
    assert.deepEqual(described.unrestored, [{ name: a.stored[0], reason: "describe" }]);
  });

  test("the lifecycle: chats, export, import, retention and delete", async () => {
    const c = new Client(server.url);
    const chat = c.chat("ts-life");
    const shot = png(4, 4, [40, 50, 60]);
    await chat.append("l1", [{ role: "user", content: [{ type: "text", text: "keep this" }, image(shot)], timestamp: 1767225600000 }]);
    const list = await c.chats({ limit: 100 });
    assert.ok(list.chats.some((x) => x.chat === "ts-life" && x.messages === 1));
    let exported = "";
    for await (const part of chat.export()) exported += new TextDecoder().decode(part);
    assert.match(exported, /"type":"image"/, "the export carries the image inline");
    const copy = c.chat("ts-life-copy");
    const imported = await copy.import(exported);
    assert.equal(imported.messages, 1);
    assert.equal(imported.new, 1);
    assert.equal((await copy.import(exported)).new, 0, "importing the same file again logs nothing new");
    assert.deepEqual((await copy.messages()).messages, (await chat.messages()).messages);
    assert.deepEqual(await c.setRetention(30), { days: 30 });
    assert.deepEqual(await chat.retention(), { days: 30, inherited: true });
    assert.deepEqual(await chat.setRetention(7), { days: 7 });
    assert.deepEqual(await chat.setRetention(null), { days: 30, inherited: true });
    await c.setRetention(0);
    const d = await chat.delete();
    assert.equal(d.chat, "ts-life");
    if (d.accepted) await chat.delete();
    assert.deepEqual((await chat.messages()).messages, []);
    assert.equal((await copy.messages()).messages.length, 1, "the copy keeps its image");
  });

  test("erase leaves a tombstone and answers its receipt; erasure answers it again; a bad request is a 400 naming the field", async () => {
    const chat = new Client(server.url).chat("ts-erase");
    const ids = await chat.append("erase-1", [user("my locker code is 4711"), user("the weather is fine")]);
    const rec = await chat.erase({ seqs: [ids[0]] });
    assert.equal(rec.chat, "ts-erase");
    assert.match(rec.erasure, /^[0-9a-f]{24}$/);
    assert.deepEqual(rec.messages, [{ seq: ids[0], entries: [ids[0]] }]);
    assert.equal((await chat.erase({ seqs: [ids[0]] })).erasure, rec.erasure, "the same request answers the same erasure");
    const again = await chat.erasure(rec.erasure);
    assert.equal(again.erasure, rec.erasure);
    assert.deepEqual(again.messages, rec.messages);
    const page = (await chat.messages()).messages;
    assert.equal(page.length, 2);
    assert.equal(page[0].seq, ids[0]);
    assert.equal(typeof page[0].erased, "string", "the erased message reads back as a tombstone");
    assert.equal(page[0].message, undefined);
    assert.doesNotMatch(JSON.stringify(page), /4711/);
    await assert.rejects(chat.erase({ match: "abc" }), (e) => e instanceof DurachatError && e.status === 400 && e.field === "match");
    await assert.rejects(chat.erasure("0".repeat(24)), (e) => e instanceof DurachatError && e.status === 404);
  });

  test("a pi session file imports its last branch; a large one goes in parts and pieces", async () => {
    const chat = new Client(server.url).chat("ts-import");
    const session = [
      { type: "session", version: 3, id: "s", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/w" },
      { type: "message", id: "a", parentId: null, timestamp: "2026-01-01T00:00:01.000Z", message: user("first") },
      { type: "message", id: "b", parentId: "a", timestamp: "2026-01-01T00:00:02.000Z", message: { role: "assistant", content: [{ type: "text", text: "abandoned" }], timestamp: 1767225602000 } },
      { type: "message", id: "c", parentId: "a", timestamp: "2026-01-01T00:00:03.000Z", message: { role: "assistant", content: [{ type: "text", text: "kept" }], timestamp: 1767225603000 } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const r = await chat.import(session);
    assert.deepEqual([r.messages, r.skipped], [2, 1]);
    assert.deepEqual((await chat.messages()).messages.map((m) => m.message.content[0].text), ["first", "kept"]);
    // pi 1.x: a system message first, then a "!" command's bash execution
    // (pi 1.6's SessionMessageEntry, @earendil-works/pi-coding-agent).
    const pi1 = [
      { type: "session", version: 3, id: "s", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/w" },
      { type: "message", id: "p", parentId: null, timestamp: "2026-01-01T00:00:00.100Z", message: { role: "system", content: "You are pi.", toolsAdded: [], timestamp: 1767225600100 } },
      { type: "message", id: "x", parentId: "p", timestamp: "2026-01-01T00:00:00.200Z", message: { role: "bashExecution", command: "ls", output: "a", exitCode: 0, cancelled: false, truncated: false, timestamp: 1767225600200 } },
      { type: "message", id: "a", parentId: "x", timestamp: "2026-01-01T00:00:01.000Z", message: user("first") },
    ].map((l) => JSON.stringify(l)).join("\n");
    const r1 = await new Client(server.url).chat("ts-import-pi1").import(pi1);
    assert.deepEqual([r1.messages, r1.skipped, r1.skippedByKind], [1, 2, { "message/system": 1, "message/bashExecution": 1 }]);
    // Another host's file is refused, naming it, before anything is sent.
    const codex = JSON.stringify({ timestamp: "2026-01-01T00:00:00.000Z", type: "session_meta", payload: { id: "r", cwd: "/w" } });
    await assert.rejects(new Client(server.url).chat("ts-import-codex").import(codex), /line 1: the file is a Codex CLI rollout/);
    const claude = JSON.stringify({ parentUuid: null, isSidechain: false, sessionId: "c", type: "user", message: { role: "user", content: "hi" }, uuid: "u1" });
    await assert.rejects(new Client(server.url).chat("ts-import-claude").import(claude), /line 1: the file is a Claude Code session/);
    // 3 lines of 2.5 MB (two parts) and one of 5 MB (pieces).
    const big = (n, bytes) => JSON.stringify({ seq: n, message: { role: "user", content: [{ type: "text", text: String(n).repeat(bytes) }], timestamp: 1767225600000 + n } });
    const file = [big(1, 2_500_000), big(2, 2_500_000), big(3, 5_000_000), big(4, 10)].join("\n");
    const large = new Client(server.url).chat("ts-import-large");
    const got = await large.import(file);
    assert.equal(got.messages, 4);
    assert.equal(got.new, got.entries, "every entry is new");
    const read = await all(large);
    assert.deepEqual(read.map((m) => m.message.content[0].text.length), [2_500_000, 2_500_000, 5_000_000, 10]);
    assert.equal((await large.import(file)).new, 0);
  });

  test("a file whose two halves are the same parts logs every message, once", async () => {
    // 50 lines of 83 kB make a part; the second part is the first again.
    const line = JSON.stringify({ type: "message", message: { role: "toolResult", toolCallId: "call_1", toolName: "shell", isError: false, content: [{ type: "text", text: "x".repeat(83_000) }], timestamp: 0 } });
    const file = [JSON.stringify({ type: "session", version: 3, id: "twice", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/w" }), ...Array(100).fill(line)].join("\n");
    const chat = new Client(server.url).chat("ts-import-twice");
    assert.deepEqual([(await chat.import(file)).messages, (await all(chat)).length], [100, 100]);
    assert.equal((await chat.import(file)).new, 0, "importing it again logs nothing new");
    assert.equal((await all(chat)).length, 100);
  });
});

describe("errors", () => {
  test("an API error is a DurachatError with status, code, field and request id", async () => {
    const chat = new Client(server.url).chat("bad id!");
    await assert.rejects(chat.view(), (e) => {
      assert.ok(e instanceof DurachatError);
      assert.equal(e.status, 400);
      assert.equal(e.code, "bad_request");
      assert.match(e.message, /^durachat: 400 bad_request: /);
      assert.ok(e.requestId);
      return true;
    });
    const bad = new Client(server.url).chat("ts-err");
    await assert.rejects(bad.append("", [{ role: "robot", content: [] }]), (e) => e.status === 400 && /messages\[0\]\.role/.test(e.field));
  });

  test("a bad or missing token is a 401", async () => {
    const dir = tempDir("durachat-ts-tokens-");
    const s = await startServer(bin, dir.dir, "ts-test-token-0123456789=tenant-a");
    try {
      await assert.rejects(new Client(s.url).chat("x").view(), (e) => e.status === 401 && e.code === "unauthorized");
      await assert.rejects(new Client(s.url, { token: "wrong-token-0123456789" }).chat("x").view(), (e) => e.status === 401);
      const v = await new Client(s.url, { token: "ts-test-token-0123456789" }).chat("x").view();
      assert.equal(typeof v.view, "string");
    } finally {
      await s.stop();
      dir.remove();
    }
  });

  test("a server that cannot be reached is status 0, unreachable", async () => {
    const c = new Client("http://127.0.0.1:9", { attempts: 1 });
    await assert.rejects(c.health(), (e) => e instanceof DurachatError && e.status === 0 && e.code === "unreachable");
  });

  test("an answer that is not durachat's JSON gets its status's code", async () => {
    const p = await proxy(server.url, () => ({ status: 502, headers: { "content-type": "text/html" }, body: "<html>Bad Gateway</html>" }));
    try {
      await assert.rejects(new Client(p.url).chat("x").status(), (e) => e.status === 502 && e.code === "unavailable" && e.detail === "<html>Bad Gateway</html>");
    } finally {
      await p.close();
    }
  });

  test("the base URL is checked", () => {
    assert.throws(() => new Client("localhost:8080"), /want http\(s\):\/\/host/);
    assert.throws(() => new Client("ftp://h"), /want http\(s\):\/\/host/);
    assert.equal(new Client("http://h:1/stage/").baseURL, "http://h:1/stage");
  });
});

describe("retries", () => {
  test("Retry-After is read as seconds or an HTTP date", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(retryAfterMs("2", now), 2000);
    assert.equal(retryAfterMs("Thu, 01 Jan 2026 00:00:03 GMT", now), 3000);
    assert.equal(retryAfterMs("Wed, 31 Dec 2025 00:00:00 GMT", now), 0);
    assert.equal(retryAfterMs("", now), 1000);
    assert.equal(retryAfterMs("soon", now), 1000);
  });

  test("a retry-safe call waits out Retry-After and succeeds", async () => {
    const p = await proxy(server.url, (req, n) => (n === 1 ? { status: 503, headers: { "retry-after": "1", "content-type": "application/json" }, body: '{"error":{"code":"unavailable","message":"store down"}}' } : null));
    try {
      const v = await new Client(p.url).chat("ts-retry").view();
      assert.equal(typeof v.view, "string");
      assert.equal(p.seen.length, 2);
      assert.ok(p.seen[1].at - p.seen[0].at >= 950, "waited the Retry-After");
    } finally {
      await p.close();
    }
  });

  test("an append without a receipt is never repeated; with one it is", async () => {
    const unavailable = { status: 503, headers: { "retry-after": "0", "content-type": "application/json" }, body: '{"error":{"code":"unavailable","message":"store down"}}' };
    const p = await proxy(server.url, (req, n) => (n === 1 ? unavailable : null));
    try {
      const chat = new Client(p.url).chat("ts-retry-append");
      await assert.rejects(chat.append("", [user("once")]), (e) => isUnavailable(e) && e.retryAfterMs === 0 && e.detail === "store down");
      assert.equal(p.seen.length, 1, "not repeated: a repeat would log the messages twice");
      assert.deepEqual(await chat.append("r1", [user("once")]), [0]);
      assert.equal(p.seen.length, 2, "a fresh call, sent once");
    } finally {
      await p.close();
    }
    const always = await proxy(server.url, () => unavailable);
    try {
      const chat = new Client(always.url, { attempts: 3 }).chat("ts-retry-append");
      await assert.rejects(chat.append("r2", [user("twice")]), (e) => isUnavailable(e));
      assert.equal(always.seen.length, 3, "a receipt makes the append safe to repeat, at most attempts times");
    } finally {
      await always.close();
    }
  });

  test("no time left to wait: the 503 is the answer", async () => {
    const p = await proxy(server.url, () => ({ status: 503, headers: { "retry-after": "20" } }));
    try {
      const started = Date.now();
      await assert.rejects(new Client(p.url).chat("x").view("", { timeoutMs: 2000 }), (e) => e.status === 503 && e.retryAfterMs === 20000);
      assert.ok(Date.now() - started < 1500);
      assert.equal(p.seen.length, 1);
    } finally {
      await p.close();
    }
  });

  test("the caller's signal ends a wait", async () => {
    const p = await proxy(server.url, () => ({ status: 503, headers: { "retry-after": "10" } }));
    try {
      const ac = new AbortController();
      setTimeout(() => ac.abort(new Error("host gave up")), 200);
      await assert.rejects(new Client(p.url).chat("x").view("", { signal: ac.signal }), /host gave up/);
    } finally {
      await p.close();
    }
  });
});

describe("uploads", () => {
  test("upload stores the bytes by themselves, once", async () => {
    const p = await proxy(server.url, () => null);
    try {
      const chat = new Client(p.url, { token: "" }).chat("ts-upload");
      const bytes = fromBase64(noisyPng(64, 64, 7));
      const name = await chat.upload(bytes);
      assert.equal(name, (await describeImage(bytes)).name);
      const asked = () => p.seen.filter((s) => s.method === "POST" && s.path.endsWith("/uploads"));
      assert.equal(asked().length, 1);
      assert.ok(asked()[0].bytes < 300, "the bytes go to the target, not to the route");
      const target = await chat.uploadTarget(await describeImage(bytes));
      assert.deepEqual([target.stored, target.upload], [true, null], "stored already: no target");
      assert.equal(await chat.upload(bytes), name);
      await chat.append("u1", [{ role: "user", content: [refBlock(name)] }]);
      assert.equal(toBase64((await chat.image(name)).data), toBase64(bytes));
    } finally {
      await p.close();
    }
  });

  test("past the body limit, the hooks and append upload the images first", async () => {
    const p = await proxy(server.url, () => null);
    try {
      const shot = noisyPng(300, 300, 11); // about 360 KB
      const chat = new Client(p.url, { bodyLimit: 100_000 }).chat("ts-limit");
      const a = await chat.afterTool({ call: { id: "t", name: "shot" }, result: { content: [image(shot)] } });
      const name = (await describeImage(fromBase64(shot))).name;
      assert.deepEqual(a.stored, [name]);
      assert.deepEqual(a.result.content, [refBlock(name)]);
      const hook = p.seen.find((s) => s.path.endsWith("/hooks/after-tool"));
      assert.ok(hook.bytes < 1000, `after-tool carried ${hook.bytes} bytes: the image went by itself`);
      const msg = { role: "user", content: [{ type: "text", text: "see" }, image(noisyPng(300, 300, 12))], timestamp: 1 };
      await chat.append("big", [msg]);
      assert.equal(msg.content[1].type, "image", "the caller's message is not changed");
      const logged = (await chat.messages()).messages[0].message;
      assert.ok(refName(logged.content[1]));
      assert.equal(p.seen.filter((s) => s.method === "POST" && s.path.endsWith("/uploads")).length, 2);
    } finally {
      await p.close();
    }
  });

  test("an image past the local server's 10 MiB body goes through with the default limit", async () => {
    const shot = noisyPng(1900, 1900, 5); // about 10.8 MB of PNG, 14 MB as base64
    assert.ok(shot.length > 10 * 1024 * 1024);
    const chat = new Client(server.url).chat("ts-huge");
    const a = await chat.afterTool({ call: { id: "t", name: "shot" }, result: { content: [image(shot)] } });
    assert.equal(a.stored.length, 1);
    assert.equal(a.stored[0], (await describeImage(fromBase64(shot))).name);
    assert.deepEqual(a.result.content, [refBlock(a.stored[0])]);
    const back = await chat.image(a.stored[0]);
    assert.ok(back.data.length > 0, "stored and readable");
  });
});
