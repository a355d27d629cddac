// The extension in a real pi session (the pinned SDK), with pi-ai's faux
// provider as the model and the real durachat server.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { execFileSync } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { fauxAssistantMessage, fauxModels, fauxText, fauxToolCall, modelAccess, modelRequest, modern, piAgent, scope } from "./pi.mjs";
import { buildServer, freePort, noisyPng, png, startServer, tempDir } from "../../ts/test/server.mjs";

const { createAgentSession, DefaultResourceLoader, SessionManager, SettingsManager } = piAgent;

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const refText = /^\[image [0-9a-f]{16}\]$/;
const shot = png(64, 48, [200, 30, 30]);
const realFetch = globalThis.fetch;

let tmp, bin, faux;

before(() => {
  tmp = tempDir("durachat-pi-");
  bin = buildServer(tmp.dir);
  faux = fauxModels([
    { id: "faux-vision", input: ["text", "image"] },
    { id: "faux-text", input: ["text"] },
  ]);
});

after(() => {
  faux?.unregister?.();
  tmp?.remove();
});

/** The screenshot tool of the host: a PNG (base64) in its result. */
function screenshotTool(data = shot) {
  return {
    name: "screenshot",
    label: "Screenshot",
    description: "Take a screenshot of the screen.",
    parameters: { type: "object", properties: {} },
    async execute() {
      return {
        content: [
          { type: "text", text: "Captured the login page." },
          { type: "image", data, mimeType: "image/png" },
        ],
        details: {},
      };
    },
  };
}

/** The name durachat gives an image: the first 16 hex digits of the SHA-256 of its base64. */
function nameOf(base64) {
  return createHash("sha256").update(base64).digest("hex").slice(0, 16);
}

/**
 * A pi session as the pi CLI makes one, with the extension installed from
 * this package, configured by env (the extension's variables not in env
 * are unset).
 */
async function openSession({ url, sessionManager, cwd, warnings, model = faux.getModel(), tool = screenshotTool(), tools = [tool], env = {}, extension = true, installed = false, settings = {} }) {
  process.env.DURACHAT_URL = url;
  for (const name of ["DURACHAT_CHAT", "DURACHAT_TOKEN", "DURACHAT_BODY_LIMIT", "DURACHAT_BUDGET_BYTES", "DURACHAT_DESCRIBE"]) delete process.env[name];
  Object.assign(process.env, env);
  const agentDir = path.join(cwd, ".agent");
  const overrides = { compaction: { enabled: false }, retry: { enabled: false }, ...settings };
  // Installed: the agent's own settings name the package, as pi install left them.
  const settingsManager = installed ? SettingsManager.create(cwd, agentDir) : SettingsManager.inMemory(overrides);
  if (installed) settingsManager.applyOverrides(overrides);
  const resourceLoader = new DefaultResourceLoader({
    cwd,
    agentDir,
    settingsManager,
    additionalExtensionPaths: extension && !installed ? [pkgDir] : [],
    noSkills: true,
    noPromptTemplates: true,
    noThemes: true,
    noContextFiles: true,
    systemPrompt: "You are a test agent.",
  });
  await resourceLoader.reload();
  const { session, extensionsResult } = await createAgentSession({
    cwd,
    agentDir,
    model,
    thinkingLevel: "off",
    ...(await modelAccess(faux, model, agentDir)),
    resourceLoader,
    settingsManager,
    sessionManager,
    noTools: "builtin",
    customTools: tools,
  });
  assert.deepEqual(extensionsResult.errors, [], "the extension loads");
  await session.bindExtensions({
    onError: (e) => warnings?.push(`extension error: ${e.error ?? e.message ?? e}`),
  });
  return session;
}

/**
 * Ends a session as pi does when it quits: session_shutdown (where the
 * extension waits for its last messages to be logged, and marks them), then
 * dispose.
 */
async function close(session) {
  await session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" });
  session.dispose();
}

/** The images in a model context's messages, by message role. */
function images(context) {
  const out = [];
  for (const m of context.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const b of m.content) if (b.type === "image") out.push({ role: m.role, data: b.data });
  }
  return out;
}

/** Prompts and waits until pi has handled every event of the run (and so persisted its messages). */
async function run(session, text, options) {
  let unsubscribe;
  const ended = new Promise((resolve) => {
    unsubscribe = session.subscribe((e) => e.type === "agent_end" && resolve());
  });
  await session.prompt(text, options);
  await ended;
  unsubscribe();
}

/** Waits until durachat has logged n entries of chat. */
async function logged(url, chat, n, headers = {}) {
  const deadline = Date.now() + 120_000; // a hang, not a pace
  for (;;) {
    const r = await fetch(`${url}/v1/chats/${chat}/status`, { headers });
    assert.equal(r.status, 200);
    const { entries } = await r.json();
    if (entries === n) return;
    assert.ok(entries < n, `${entries} entries logged, want ${n}`);
    assert.ok(Date.now() < deadline, `${entries} entries logged after 2 minutes, want ${n}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** What the model got: the system prompt, the messages and the tool names. */
const snapshot = modelRequest;

function lastToolResult(context) {
  return context.messages.filter((m) => m.role === "toolResult").at(-1);
}

/** The messages of a session file, by role. */
function fileMessages(file, role) {
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((e) => e.type === "message" && e.message.role === role).map((e) => e.message);
}

/** Catches console.warn (where the extension says durachat failed, without a UI) until restored. */
function catchWarnings() {
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  return { warnings, restore: () => (console.warn = warn) };
}

test("a screenshot session keeps refs, shows the model the image, zooms back to it, and resumes with its memory", async () => {
  const work = tempDir("durachat-pi-work-");
  const data = path.join(tmp.dir, "data-" + Date.now());
  let server = await startServer(bin, data);
  try {
    const seen = [];
    const sm = SessionManager.create(work.dir, path.join(work.dir, "sessions"));
    let session = await openSession({ url: server.url, sessionManager: sm, cwd: work.dir });
    const chat = `pi-${session.sessionId}`;

    // Turn 1: the model takes a screenshot, then sees it.
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      (context) => {
        seen.push({ step: "after screenshot", context: snapshot(context) });
        return fauxAssistantMessage(fauxText("A login page with a red banner."));
      },
    ]);
    await run(session, "Take a screenshot of the login page.");
    const afterShot = seen.at(-1).context;
    assert.deepEqual(afterShot.tools.map((t) => t.name).sort(), ["date", "screenshot", "zoom"], "durachat's memory tools are pi tools");
    const result = lastToolResult(afterShot);
    assert.deepEqual(result.content.map((b) => b.type), ["text", "image"], "the model's request carries the image");
    assert.equal(result.content[1].data, shot, "the image is the screenshot, byte for byte");

    // The session file keeps the ref, never the base64.
    const file = session.sessionFile;
    assert.ok(file, "the session is persisted");
    const text = readFileSync(file, "utf8");
    assert.ok(!text.includes(shot.slice(0, 200)), "no base64 in the session file");
    const kept = text.split("\n").filter(Boolean).map((l) => JSON.parse(l))
      .filter((e) => e.type === "message" && e.message.role === "toolResult").at(-1);
    assert.equal(kept.message.content[1].type, "text");
    assert.match(kept.message.content[1].text, refText);
    const ref = kept.message.content[1].text;

    // Turn 2: zoom into the logged tool result (entries: 0 prompt, 1 call, 2 result).
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("zoom", { id: 2 }, { id: "call_zoom" }), { stopReason: "toolUse" }),
      (context) => {
        seen.push({ step: "after zoom", context: snapshot(context) });
        return fauxAssistantMessage(fauxText("Same page."));
      },
    ]);
    await run(session, "Look at that screenshot again with zoom.");
    const afterZoom = seen.at(-1).context;
    const zoomed = lastToolResult(afterZoom);
    assert.equal(zoomed.toolName, "zoom");
    assert.ok(zoomed.content.some((b) => b.type === "image" && b.data === shot), "zoom gives the image back to the model");
    const zoomKept = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
      .filter((e) => e.type === "message" && e.message.role === "toolResult").at(-1);
    assert.ok(zoomKept.message.content.some((b) => b.type === "text" && b.text === ref), "the zoom result is kept as the same ref");

    // Every message was logged, each once.
    await logged(server.url, chat, 8); // 2 prompts, 4 assistant messages, 2 tool results
    await close(session);

    // Restart durachat and pi; resume the session.
    await server.stop();
    server = await startServer(bin, data);
    session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, path.join(work.dir, "sessions")), cwd: work.dir });
    assert.equal(`pi-${session.sessionId}`, chat, "the resumed session keeps its chat");
    faux.setResponses([
      (context) => {
        seen.push({ step: "resumed", context: snapshot(context) });
        return fauxAssistantMessage(fauxText("I remember."));
      },
    ]);
    await run(session, "What did you see before?");
    const resumed = seen.at(-1).context;
    assert.match(resumed.systemPrompt, /<chat>[\s\S]*\[image [0-9a-f]{16}\][\s\S]*<\/chat>/, "the view, with the screenshot's ref, is in the system prompt");
    assert.ok(images(resumed).some((i) => i.role === "toolResult" && i.data === shot), "the resumed history shows the image again");
    await logged(server.url, chat, 10); // only the new prompt and answer
    await close(session);
  } finally {
    await server.stop();
    work.remove();
  }
});

test("without a reachable server the session is pi's own, and the extension says so once", async () => {
  const work = tempDir("durachat-pi-down-");
  const port = await freePort(); // nothing listens there
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  try {
    // A small body limit: the screenshot's upload fails too, and is said with the rest.
    const session = await openSession({ url: `http://127.0.0.1:${port}`, sessionManager: SessionManager.inMemory(work.dir), cwd: work.dir, warnings, env: { DURACHAT_BODY_LIMIT: "100" } });
    let context;
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("done"));
      },
    ]);
    await run(session, "Take a screenshot.");
    const result = lastToolResult(context);
    assert.deepEqual(result.content.map((b) => b.type), ["text", "image"], "the image stays inline, as pi keeps it");
    assert.equal(context.systemPrompt.includes("<chat>"), false);
    assert.deepEqual(context.tools.map((t) => t.name), ["screenshot"], "no memory tools without the server");
    const said = warnings.filter((w) => w.includes("durachat"));
    assert.equal(said.length, 1, `said once: ${JSON.stringify(warnings)}`);
    assert.match(said[0], new RegExp(`127\\.0\\.0\\.1:${port}`));
    await close(session);
  } finally {
    console.warn = warn;
    work.remove();
  }
});

test("past the body limit, images are uploaded first: the session keeps refs, each image is stored once, and the model sees it", async () => {
  const work = tempDir("durachat-pi-upload-");
  const token = "pi-test-token-0123456789";
  const auth = { authorization: `Bearer ${token}` };
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()), `${token}=pi-tenant`);
  const big = noisyPng(96, 96, 1); // about 37 KB of base64
  const attached = noisyPng(96, 96, 2);
  const name = nameOf(big);
  // Every call the extension makes; its client takes the global fetch when the session opens.
  const calls = [];
  globalThis.fetch = (input, init = {}) => {
    calls.push({ method: init.method ?? "GET", url: String(input), authorization: new Headers(init.headers).get("authorization") });
    return realFetch(input, init);
  };
  const caught = catchWarnings();
  try {
    const seen = [];
    const session = await openSession({
      url: server.url,
      sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")),
      cwd: work.dir,
      tool: screenshotTool(big),
      env: { DURACHAT_TOKEN: token, DURACHAT_BODY_LIMIT: "8192" },
    });
    globalThis.fetch = realFetch;
    const chat = `pi-${session.sessionId}`;

    // Two turns, each with a screenshot of the same page.
    for (const turn of [1, 2]) {
      faux.setResponses([
        fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: `call_shot${turn}` }), { stopReason: "toolUse" }),
        (context) => {
          seen.push(snapshot(context));
          return fauxAssistantMessage(fauxText("A noisy page."));
        },
      ]);
      await run(session, `Take screenshot ${turn}.`);
      const result = lastToolResult(seen.at(-1));
      assert.deepEqual(result.content.map((b) => b.type), ["text", "image"], `turn ${turn}: the model's request carries the image`);
      assert.equal(result.content[1].data, big, `turn ${turn}: the image is the screenshot, byte for byte`);
    }
    const kept = fileMessages(session.sessionFile, "toolResult");
    assert.deepEqual(kept.map((m) => m.content[1]), [1, 2].map(() => ({ type: "text", text: `[image ${name}]` })), "the session keeps both results as refs");
    assert.ok(!readFileSync(session.sessionFile, "utf8").includes(big.slice(0, 200)), "no base64 in the session file");

    // Turn 3: the user attaches an image; it is logged past the limit too.
    faux.setResponses([fauxAssistantMessage(fauxText("I see it."))]);
    await run(session, "Here is what I see.", { images: [{ type: "image", data: attached, mimeType: "image/png" }] });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const r = await realFetch(`${server.url}/v1/chats/${chat}/messages`, { headers: auth });
      assert.equal(r.status, 200);
      const log = JSON.stringify((await r.json()).messages.slice(-2).map((e) => e.message.content));
      if (log.includes(`[image ${nameOf(attached)}]`) && log.includes("I see it.")) break; // the last turn, logged
      assert.ok(Date.now() < deadline, `the attached image is logged as its ref within 10 s: ${log}`);
      await new Promise((res) => setTimeout(res, 50));
    }

    // Each image went up once, straight to its upload target; the second
    // screenshot was stored already.
    const uploads = calls.filter((c) => c.method === "POST" && c.url.endsWith(`/v1/chats/${chat}/uploads`));
    const puts = calls.filter((c) => c.method === "PUT");
    assert.equal(uploads.length, 3, "an upload asked for each image sent: two screenshots and the attachment");
    assert.equal(puts.length, 2, "the bytes of each distinct image are put once");
    assert.ok(puts.every((c) => c.url.startsWith(`${server.url}/v1/uploads/`) && c.authorization === null), "puts go to the target, without Authorization");
    assert.ok(uploads.every((c) => c.authorization === `Bearer ${token}`));
    for (const [data, what] of [[big, "the screenshot"], [attached, "the attachment"]]) {
      const r = await realFetch(`${server.url}/v1/chats/${chat}/images/${nameOf(data)}`, { headers: auth });
      assert.equal(r.status, 200, `${what} is stored`);
      assert.equal(Buffer.from(await r.arrayBuffer()).toString("base64"), data, `${what} is stored byte for byte`);
    }
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
    await close(session);
  } finally {
    globalThis.fetch = realFetch;
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("a model that takes no images gets refs for screenshots and attachments, never image blocks; DURACHAT_DESCRIBE=1 does the same for any model", async () => {
  const work = tempDir("durachat-pi-describe-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  try {
    for (const { model, env, why } of [
      { model: faux.getModel("faux-text"), env: {}, why: "a model of text input only" },
      { model: faux.getModel("faux-vision"), env: { DURACHAT_DESCRIBE: "1" }, why: "DURACHAT_DESCRIBE=1" },
    ]) {
      const session = await openSession({ url: server.url, sessionManager: SessionManager.inMemory(work.dir), cwd: work.dir, model, env });
      let context;
      faux.setResponses([
        fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
        (c) => {
          context = snapshot(c);
          return fauxAssistantMessage(fauxText("A login page, I read."));
        },
      ]);
      const attached = png(40, 30, [20, 90, 200]);
      await run(session, "Take a screenshot of the login page, like this one.", { images: [{ type: "image", data: attached, mimeType: "image/png" }] });
      const result = lastToolResult(context);
      // The offline compactor writes no descriptions: the ref stays bare.
      assert.deepEqual(result.content, [
        { type: "text", text: "Captured the login page." },
        { type: "text", text: `[image ${nameOf(shot)}]` },
      ], `${why}: the screenshot's ref goes as text`);
      const user = context.messages.find((m) => m.role === "user");
      assert.deepEqual(user.content.at(-1), { type: "text", text: `[image ${nameOf(attached)}]` }, `${why}: the attachment's ref goes as text`);
      assert.deepEqual(images(context), [], `${why}: no image block in the model's request`);
      await logged(server.url, `pi-${session.sessionId}`, 4);
      await close(session);
    }
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("a message the server refuses for good is dropped and said, and the messages after it are logged", async () => {
  const work = tempDir("durachat-pi-refused-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  try {
    // A PNG cut short: not an image. (pi 1.x drops such an attachment
    // itself, so the tool returns it.) after-tool refuses it, so the result
    // keeps it, and the server refuses the message that carries it, on
    // every try.
    const broken = shot.slice(0, 64);
    const session = await openSession({ url: server.url, sessionManager: SessionManager.inMemory(work.dir), cwd: work.dir, tool: screenshotTool(broken) });
    const chat = `pi-${session.sessionId}`;
    let context;
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("That image is broken."));
      },
    ]);
    await run(session, "Here is a picture.");
    faux.setResponses([fauxAssistantMessage(fauxText("Still here."))]);
    await run(session, "Are you there?");
    assert.equal(lastToolResult(context).content[1].data, broken, "the refused image stays inline");
    await logged(server.url, chat, 5); // every message but the refused result
    const r = await fetch(`${server.url}/v1/chats/${chat}/messages`);
    const log = (await r.json()).messages.map((e) => e.message);
    assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "assistant", "user", "assistant"], "the refused result is not logged");
    for (const want of ["That image is broken.", "Are you there?", "Still here."]) {
      assert.ok(JSON.stringify(log).includes(want), `"${want}" is logged after the refused message`);
    }
    const said = (what) => caught.warnings.filter((w) => w.includes(what));
    assert.equal(said("refused a message").length, 1, `the refusal is said once: ${JSON.stringify(caught.warnings)}`);
    assert.equal(said("cannot store the images").length, 1, `that the image stays inline is said once: ${JSON.stringify(caught.warnings)}`);
    await close(session);
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("messages pi kept while the server was down are logged when the session resumes, each once, and a marker in the session says so", async () => {
  const work = tempDir("durachat-pi-backlog-");
  const data = path.join(tmp.dir, "data-" + Date.now());
  const caught = catchWarnings();
  let server;
  try {
    // The session runs with nothing listening: pi keeps its messages, durachat has none.
    const down = `http://127.0.0.1:${await freePort()}`;
    const sm = SessionManager.create(work.dir, path.join(work.dir, "sessions"));
    let session = await openSession({ url: down, sessionManager: sm, cwd: work.dir });
    const chat = `pi-${session.sessionId}`;
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      fauxAssistantMessage(fauxText("A login page.")),
    ]);
    await run(session, "Take a screenshot.");
    const file = session.sessionFile;
    await close(session);

    // Resumed with the server up: the four messages are logged, in order, before the next turn's.
    server = await startServer(bin, data);
    const appends = [];
    globalThis.fetch = (input, init = {}) => {
      if ((init.method ?? "GET") === "POST" && String(input).endsWith("/messages")) appends.push(JSON.parse(init.body).messages[0].role);
      return realFetch(input, init);
    };
    session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, path.join(work.dir, "sessions")), cwd: work.dir });
    faux.setResponses([fauxAssistantMessage(fauxText("I remember."))]);
    await run(session, "What did you see?");
    await logged(server.url, chat, 6);
    await close(session);
    assert.deepEqual(appends, ["user", "assistant", "toolResult", "assistant", "user", "assistant"], "the backlog goes first, in order");
    const r = await realFetch(`${server.url}/v1/chats/${chat}/messages`);
    const log = (await r.json()).messages.map((e) => e.message);
    assert.equal(log[0].content[0].text, "Take a screenshot.");
    assert.match(log[2].content[1].text, refText, "the backlog's inline screenshot is stored and logged as its ref");
    const markers = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
      .filter((e) => e.type === "custom" && e.customType === "durachat");
    assert.ok(markers.length > 0 && markers.every((m) => m.data.chat === chat), "the session marks what durachat has");

    // Resumed again: nothing is logged twice, not even tried.
    appends.length = 0;
    session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, path.join(work.dir, "sessions")), cwd: work.dir });
    faux.setResponses([fauxAssistantMessage(fauxText("Still here."))]);
    await run(session, "Are you there?");
    await logged(server.url, chat, 8);
    await close(session);
    assert.deepEqual(appends, ["user", "assistant"], "only the new turn is sent");
  } finally {
    globalThis.fetch = realFetch;
    caught.restore();
    await server?.stop();
    work.remove();
  }
});

test("a turn waits a bounded time for earlier messages to be logged, then goes on; they are logged after", { timeout: 120_000 }, async () => {
  const work = tempDir("durachat-pi-slow-");
  const caught = catchWarnings();
  let server;
  let release;
  const released = new Promise((resolve) => (release = resolve));
  try {
    const sm = SessionManager.create(work.dir, path.join(work.dir, "sessions"));
    let session = await openSession({ url: `http://127.0.0.1:${await freePort()}`, sessionManager: sm, cwd: work.dir });
    const chat = `pi-${session.sessionId}`;
    faux.setResponses([fauxAssistantMessage(fauxText("noted"))]);
    await run(session, "Remember this.");
    const file = session.sessionFile;
    await close(session);

    // The server is up but holds every append until released.
    server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
    globalThis.fetch = async (input, init = {}) => {
      if ((init.method ?? "GET") === "POST" && String(input).endsWith("/messages")) await released;
      return realFetch(input, init);
    };
    session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, path.join(work.dir, "sessions")), cwd: work.dir });
    let modelCalled = false;
    faux.setResponses([
      () => {
        modelCalled = true;
        return fauxAssistantMessage(fauxText("still here"));
      },
    ]);
    await run(session, "Are you there?");
    assert.ok(modelCalled, "the turn went on while its backlog was still being logged");
    const r = await realFetch(`${server.url}/v1/chats/${chat}/status`);
    assert.equal((await r.json()).entries, 0, "nothing was logged while the appends were held");

    release();
    await logged(server.url, chat, 4); // the backlog, then the new turn
    await close(session);
  } finally {
    release();
    globalThis.fetch = realFetch;
    caught.restore();
    await server?.stop();
    work.remove();
  }
});

/** The session file's entries. */
function fileEntries(file) {
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

/** The image blocks of a session file's messages, with their roles. */
function fileImages(file) {
  return fileEntries(file).filter((e) => e.type === "message" && Array.isArray(e.message.content))
    .flatMap((e) => e.message.content.filter((b) => b.type === "image").map(() => e.message.role));
}

/** Records the bodies the extension posts to a route of durachat, by route's end, until restored. */
function recordPosts(ending) {
  const bodies = [];
  globalThis.fetch = (input, init = {}) => {
    if ((init.method ?? "GET") === "POST" && String(input).endsWith(ending)) bodies.push(JSON.parse(init.body));
    return realFetch(input, init);
  };
  return bodies;
}

test("a user's attached image goes through offload-input: the session file keeps its ref, durachat logs the ref, and the model sees the image", async () => {
  const work = tempDir("durachat-pi-input-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  const attached = png(40, 30, [20, 90, 200]);
  try {
    const offloads = recordPosts("/hooks/offload-input");
    const session = await openSession({ url: server.url, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir });
    globalThis.fetch = realFetch;
    const chat = `pi-${session.sessionId}`;
    let context;
    faux.setResponses([
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("A blue box."));
      },
    ]);
    await run(session, "What is this?", { images: [{ type: "image", data: attached, mimeType: "image/png" }] });
    assert.equal(offloads.length, 1, "the message went through offload-input once");

    const [user] = fileMessages(session.sessionFile, "user");
    assert.equal(user.content[0].text, "What is this?");
    assert.match(user.content[1].text, refText, "the session file keeps the attachment as its ref");
    assert.deepEqual(fileImages(session.sessionFile), [], "no image block in the session file");
    assert.ok(!readFileSync(session.sessionFile, "utf8").includes(attached.slice(0, 100)), "no base64 in the session file");

    const seen = images(context);
    assert.equal(seen.length, 1, "the model's request carries the image");
    assert.equal(seen[0].role, "user");
    assert.equal(`[image ${nameOf(seen[0].data)}]`, user.content[1].text, "the image the model sees is the one the ref names");

    await logged(server.url, chat, 2);
    const r = await fetch(`${server.url}/v1/chats/${chat}/messages`);
    const [logUser] = (await r.json()).messages.map((e) => e.message);
    assert.deepEqual(logUser.content, user.content, "durachat logs the message as the session keeps it");
    if (modern) {
      // pi 1.x keeps the prompt and the tools as a system entry: pi's own, not logged.
      assert.equal(fileMessages(session.sessionFile, "system").length, 1, "the session file has pi's system entry");
    }
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
    await close(session);
  } finally {
    globalThis.fetch = realFetch;
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("images the session holds inline are offloaded at the next start: the file keeps refs, and a text-only model or describe mode gets no image block", async () => {
  const work = tempDir("durachat-pi-leftovers-");
  const sessions = path.join(work.dir, "sessions");
  const caught = catchWarnings();
  const attached = png(40, 30, [20, 90, 200]);
  let server;
  try {
    // Before the extension: pi keeps an attachment and a screenshot inline.
    let session = await openSession({ url: "http://127.0.0.1:1", sessionManager: SessionManager.create(work.dir, sessions), cwd: work.dir, extension: false });
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      fauxAssistantMessage(fauxText("A red page.")),
    ]);
    await run(session, "Look at this, then take a screenshot.", { images: [{ type: "image", data: attached, mimeType: "image/png" }] });
    const file = session.sessionFile;
    await close(session);
    assert.deepEqual(fileImages(file), ["user", "toolResult"], "without the extension both images are inline");
    const entriesBefore = fileEntries(file);

    // With the extension and durachat up, on a model of text only.
    server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
    for (const { model, env, why } of [
      { model: faux.getModel("faux-text"), env: {}, why: "a model of text input only" },
      { model: faux.getModel("faux-vision"), env: { DURACHAT_DESCRIBE: "1" }, why: "DURACHAT_DESCRIBE=1" },
    ]) {
      session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, sessions), cwd: work.dir, model, env });
      let context;
      faux.setResponses([
        (c) => {
          context = snapshot(c);
          return fauxAssistantMessage(fauxText("I remember both."));
        },
      ]);
      await run(session, "What did you see?");
      assert.deepEqual(images(context), [], `${why}: no image block in the model's request`);
      const refs = context.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b) => b.type === "text" && refText.test(b.text));
      assert.deepEqual(refs.map((b) => b.text), [`[image ${nameOf(attached)}]`, `[image ${nameOf(shot)}]`], `${why}: the model gets both refs`);
      await close(session);
    }

    assert.deepEqual(fileImages(file), [], "the session file now keeps refs");
    assert.ok(!readFileSync(file, "utf8").includes(shot.slice(0, 100)), "no base64 in the session file");
    const entriesAfter = fileEntries(file);
    assert.deepEqual(entriesAfter.slice(0, entriesBefore.length).map((e) => e.id), entriesBefore.map((e) => e.id), "every entry is kept, in order");
    for (const [i, e] of entriesBefore.entries()) {
      if (e.type !== "message" || !["user", "toolResult"].includes(e.message.role)) {
        assert.deepEqual(entriesAfter[i], e, `entry ${e.id} (${e.type}) is unchanged`);
        continue;
      }
      const at = e.message.content.findIndex((b) => b.type === "image");
      const want = structuredClone(e.message.content);
      if (at >= 0) want[at] = { type: "text", text: `[image ${nameOf(e.message.content[at].data)}]` };
      assert.deepEqual(entriesAfter[i].message.content, want, `entry ${e.id}: the image became its ref in place`);
      assert.deepEqual({ ...entriesAfter[i].message, content: null }, { ...e.message, content: null }, `entry ${e.id}: its other fields are unchanged`);
    }

    // A vision model sees both images again.
    session = await openSession({ url: server.url, sessionManager: SessionManager.open(file, sessions), cwd: work.dir });
    let context;
    faux.setResponses([
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("Both."));
      },
    ]);
    await run(session, "Show me again.");
    assert.deepEqual(images(context).map((i) => [i.role, i.data]), [["user", attached], ["toolResult", shot]], "a vision model gets the images back");
    await close(session);
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
  } finally {
    caught.restore();
    await server?.stop();
    work.remove();
  }
});

test("a screenshot kept inline while durachat was down is offloaded when it answers again, in the same session", async () => {
  const work = tempDir("durachat-pi-outage-");
  const caught = catchWarnings();
  const port = await freePort();
  let server;
  try {
    const session = await openSession({ url: `http://127.0.0.1:${port}`, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir, model: faux.getModel("faux-text") });
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      fauxAssistantMessage(fauxText("A page.")),
    ]);
    await run(session, "Take a screenshot.");
    assert.deepEqual(fileImages(session.sessionFile), ["toolResult"], "while durachat is down the screenshot stays inline");

    server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()), undefined, port);
    let context;
    faux.setResponses([
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("A page, I read."));
      },
    ]);
    await run(session, "What was on it?");
    assert.deepEqual(images(context), [], "the text-only model gets no image block");
    assert.deepEqual(lastToolResult(context).content[1], { type: "text", text: `[image ${nameOf(shot)}]` }, "it gets the screenshot's ref");
    assert.deepEqual(fileImages(session.sessionFile), [], "the session file keeps the ref");
    await logged(server.url, `pi-${session.sessionId}`, 6);
    const said = caught.warnings.filter((w) => w.includes("durachat"));
    assert.equal(said.length, 1, `the outage is said once: ${JSON.stringify(said)}`);
    await close(session);
  } finally {
    caught.restore();
    await server?.stop();
    work.remove();
  }
});

test("a tool call another tool makes goes through after-tool as nested and reaches its caller as it is; the caller's result keeps refs", { skip: !modern && `${scope} 0.73.1 has no nested tool calls` }, async () => {
  const work = tempDir("durachat-pi-nested-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  const got = [];
  // A tool that calls the screenshot tool, as a code-mode script would, and
  // reports the screenshot as its own result.
  const inspect = {
    name: "inspect",
    label: "Inspect",
    description: "Inspect the screen.",
    parameters: { type: "object", properties: {} },
    async execute(_id, _params, signal, _onUpdate, ctx) {
      const outcome = await ctx.executeTool("screenshot", {}, { signal });
      got.push(structuredClone(outcome.result.content));
      return { content: [{ type: "text", text: "Inspected." }, ...outcome.result.content], details: {} };
    },
  };
  try {
    const hooks = recordPosts("/hooks/after-tool");
    const session = await openSession({ url: server.url, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir, tools: [screenshotTool(), inspect] });
    let context;
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("inspect", {}, { id: "call_inspect" }), { stopReason: "toolUse" }),
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("Inspected the page."));
      },
    ]);
    await run(session, "Inspect the screen.");
    globalThis.fetch = realFetch;

    assert.deepEqual(hooks.map((h) => h.call), [
      { id: "call_inspect/1", name: "screenshot", nested: true },
      { id: "call_inspect", name: "inspect", nested: false },
    ], "the nested call goes as nested, then its caller's result as the model's call");
    assert.deepEqual(got, [[{ type: "text", text: "Captured the login page." }, { type: "image", data: shot, mimeType: "image/png" }]], "the caller gets the nested result as the tool returned it");
    const [kept] = fileMessages(session.sessionFile, "toolResult");
    assert.equal(kept.toolName, "inspect");
    assert.deepEqual(kept.content.at(-1), { type: "text", text: `[image ${nameOf(shot)}]` }, "the caller's result keeps the ref in the session");
    assert.deepEqual(fileImages(session.sessionFile), [], "no image block in the session file");
    assert.equal(lastToolResult(context).content.at(-1).data, shot, "the model sees the screenshot");
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
    await close(session);
  } finally {
    globalThis.fetch = realFetch;
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("the session file after 10 screenshot turns, and with an attached image in each: with the extension it keeps refs", async (t) => {
  const work = tempDir("durachat-pi-size-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  // Screenshots of about 120 KB of base64 each, every one different.
  const shots = Array.from({ length: 10 }, (_, i) => noisyPng(200, 150, 100 + i));
  const attachments = Array.from({ length: 10 }, (_, i) => noisyPng(120, 90, 200 + i));
  let turn = 0;
  const tool = {
    ...screenshotTool(),
    async execute() {
      return { content: [{ type: "text", text: "Captured the page." }, { type: "image", data: shots[turn], mimeType: "image/png" }], details: {} };
    },
  };
  const sizes = {};
  try {
    for (const attach of [false, true]) {
      for (const extension of [false, true]) {
        const sessions = path.join(work.dir, `sessions-${attach}-${extension}`);
        const session = await openSession({ url: server.url, sessionManager: SessionManager.create(work.dir, sessions), cwd: work.dir, tool, extension });
        for (turn = 0; turn < 10; turn++) {
          faux.setResponses([
            fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: `call_${turn}` }), { stopReason: "toolUse" }),
            fauxAssistantMessage(fauxText(`Page ${turn} looks fine.`)),
          ]);
          const images = attach ? [{ type: "image", data: attachments[turn], mimeType: "image/png" }] : undefined;
          await run(session, `Take screenshot ${turn}.`, { images });
        }
        const file = session.sessionFile;
        await close(session);
        sizes[`${attach ? "screenshots and attachments" : "screenshots"}, ${extension ? "with" : "without"} the extension`] = statSync(file).size;
        assert.deepEqual(fileImages(file).length, extension ? 0 : attach ? 20 : 10, `${extension ? "with" : "without"} the extension: image blocks in the file`);
      }
    }
    for (const [what, bytes] of Object.entries(sizes)) t.diagnostic(`${scope}: ${what}: ${bytes} bytes`);
    for (const attach of ["screenshots", "screenshots and attachments"]) {
      const ratio = sizes[`${attach}, without the extension`] / sizes[`${attach}, with the extension`];
      t.diagnostic(`${scope}: ${attach}: the file is ${ratio.toFixed(1)} times smaller with the extension`);
      assert.ok(ratio > 20, `${attach}: with the extension the file is ${ratio.toFixed(1)} times smaller, want over 20`);
    }
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("an attached image durachat cannot store stays inline, said once; the model sees it and the session goes on", async () => {
  const work = tempDir("durachat-pi-input-refused-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  // A whole PNG, but wider than the 20,000 px durachat takes; pi, not
  // resizing it, passes it on as it is.
  const wide = png(20001, 1, [0, 0, 0]);
  const small = png(40, 30, [20, 90, 200]);
  try {
    const session = await openSession({
      url: server.url,
      sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")),
      cwd: work.dir,
      settings: { images: { autoResize: false } },
    });
    const chat = `pi-${session.sessionId}`;
    const seen = [];
    faux.setResponses([
      (c) => {
        seen.push(snapshot(c));
        return fauxAssistantMessage(fauxText("A black line and a blue box."));
      },
    ]);
    await run(session, "What are these?", { images: [{ type: "image", data: wide, mimeType: "image/png" }, { type: "image", data: small, mimeType: "image/png" }] });
    faux.setResponses([
      (c) => {
        seen.push(snapshot(c));
        return fauxAssistantMessage(fauxText("Still the same two."));
      },
    ]);
    await run(session, "And now?");

    assert.deepEqual(fileImages(session.sessionFile), ["user", "user"], "the message keeps both images inline: nothing of it is stored");
    for (const [i, request] of seen.entries()) {
      assert.deepEqual(images(request).map((im) => im.data), [wide, small], `request ${i + 1}: the model sees both images`);
    }
    const said = caught.warnings.filter((w) => w.includes("cannot store the images of a user message"));
    assert.equal(said.length, 1, `said once: ${JSON.stringify(caught.warnings)}`);
    assert.match(said[0], /20001/, "the warning names what is wrong");
    // The server refuses the message itself too; the turns after it are logged.
    await logged(server.url, chat, 3);
    await close(session);
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

/** Runs the pi CLI of the pi under test: pi install <this package>, into agentDir. */
function piInstall(agentDir) {
  const piDir = path.join(pkgDir, "node_modules", scope, "pi-coding-agent");
  const { bin } = JSON.parse(readFileSync(path.join(piDir, "package.json"), "utf8"));
  return execFileSync(process.execPath, [path.join(piDir, bin.pi), "install", pkgDir], {
    env: { ...process.env, PI_CODING_AGENT_DIR: agentDir },
    encoding: "utf8",
    timeout: 60_000,
  });
}

test("installed with pi install, the extension loads from pi's settings and keeps a screenshot and an attachment as refs", async () => {
  const work = tempDir("durachat-pi-installed-");
  const server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
  const caught = catchWarnings();
  const attached = png(40, 30, [20, 90, 200]);
  try {
    const agentDir = path.join(work.dir, ".agent");
    assert.match(piInstall(agentDir), /Installed/);
    const { packages } = JSON.parse(readFileSync(path.join(agentDir, "settings.json"), "utf8"));
    assert.equal(packages.length, 1, "pi's settings name the package");
    const session = await openSession({ url: server.url, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir, installed: true });
    let context;
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      (c) => {
        context = snapshot(c);
        return fauxAssistantMessage(fauxText("The same page."));
      },
    ]);
    await run(session, "Compare this with a screenshot.", { images: [{ type: "image", data: attached, mimeType: "image/png" }] });
    assert.deepEqual(context.tools.map((t) => t.name).sort(), ["date", "screenshot", "zoom"], "the installed extension's memory tools are pi tools");
    assert.deepEqual(fileImages(session.sessionFile), [], "the session file keeps refs only");
    assert.deepEqual(images(context).map((i) => [i.role, i.data]), [["user", attached], ["toolResult", shot]], "the model sees both images");
    await logged(server.url, `pi-${session.sessionId}`, 4);
    assert.deepEqual(caught.warnings.filter((w) => w.includes("durachat")), [], "nothing failed");
    await close(session);
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("over eight turns of 1 MB screenshots the model sees the newest each step, and the user is told what was left out", async () => {
  const work = tempDir("durachat-pi-turns-");
  const server = await startServer(bin, path.join(tmp.dir, "data-turns-" + Date.now()));
  const caught = catchWarnings();
  try {
    const shots = [];
    const tool = {
      ...screenshotTool(),
      async execute() {
        shots.push(noisyPng(580, 580, 300 + shots.length)); // about 1 MB of PNG
        return { content: [{ type: "text", text: "the page" }, { type: "image", data: shots.at(-1), mimeType: "image/png" }], details: {} };
      },
    };
    const session = await openSession({ url: server.url, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir, tool });
    const seen = [];
    for (let turn = 0; turn < 8; turn++) {
      faux.setResponses([
        fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: `call_${turn}` }), { stopReason: "toolUse" }),
        (context) => {
          seen.push(snapshot(context));
          return fauxAssistantMessage(fauxText(`seen ${turn}`));
        },
      ]);
      await run(session, `Look at the page (${turn}).`);
      // The step after the tool ran: its screenshot reached the model, as
      // the bytes the tool returned, and older ones are images or refs.
      const results = seen[turn].messages.filter((m) => m.role === "toolResult");
      assert.equal(results.length, turn + 1);
      const sentAs = results.map((m) => m.content[1]);
      assert.equal(sentAs[turn].type, "image", `turn ${turn}: the screenshot just taken went as ${sentAs[turn].text}`);
      assert.equal(sentAs[turn].data, shots[turn], `turn ${turn}: other bytes than the tool returned`);
      const refs = sentAs.filter((b) => b.type === "text").length;
      assert.ok(sentAs.slice(0, refs).every((b) => b.type === "text" && refText.test(b.text)), `turn ${turn}: an older image got in before a newer one`);
    }
    assert.ok(caught.warnings.some((w) => /durachat: \d+ image\(s\) left out of the model request, sent as refs or descriptions \(budget\)/.test(w)), `told: ${caught.warnings.join("; ")}`);
    await close(session);
  } finally {
    caught.restore();
    await server.stop();
    work.remove();
  }
});

/**
 * A proxy in front of durachat that passes every request, except that it
 * drops the connection of the first append once durachat has answered it:
 * that answer is lost.
 */
async function losingProxy(target) {
  let lost = false;
  let appends = 0;
  const to = new URL(target);
  const proxy = http.createServer((req, res) => {
    const isAppend = req.method === "POST" && /\/messages$/.test(req.url);
    if (isAppend) appends++;
    const up = http.request({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
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

test("a message whose append lost its answer is sent again and logged once", async () => {
  const work = tempDir("durachat-pi-lost-");
  const server = await startServer(bin, path.join(tmp.dir, "data-lost-" + Date.now()));
  const proxy = await losingProxy(server.url);
  try {
    const session = await openSession({ url: proxy.url, sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir });
    const chat = `pi-${session.sessionId}`;
    faux.setResponses([fauxAssistantMessage(fauxText("Hello."))]);
    await run(session, "Hi.");
    await logged(server.url, chat, 2); // the prompt and the answer, each once
    await close(session);
    const r = await (await fetch(`${server.url}/v1/chats/${chat}/messages`)).json();
    assert.deepEqual(r.messages.map((m) => m.message.role), ["user", "assistant"]);
    assert.ok(proxy.appends() > r.messages.length, `the lost append was sent again (${proxy.appends()} appends for ${r.messages.length} messages)`);
  } finally {
    await proxy.close();
    await server.stop();
    work.remove();
  }
});

test("a session file pi wrote, with its system entry and a ! command, imports with durachat import, the rest counted by kind", async () => {
  const work = tempDir("durachat-pi-import-");
  let server;
  try {
    const session = await openSession({ url: "http://127.0.0.1:1", sessionManager: SessionManager.create(work.dir, path.join(work.dir, "sessions")), cwd: work.dir, extension: false });
    await session.executeBash("echo built");
    faux.setResponses([
      fauxAssistantMessage(fauxToolCall("screenshot", {}, { id: "call_shot" }), { stopReason: "toolUse" }),
      fauxAssistantMessage(fauxText("A red page.")),
    ]);
    await run(session, "Take a screenshot.");
    const file = session.sessionFile;
    await close(session);
    const roles = fileEntries(file).filter((e) => e.type === "message").map((e) => e.message.role);
    assert.equal(roles.includes("system"), modern, "pi 1.x wrote its system entry");
    assert.deepEqual(roles.filter((r) => r !== "system"), ["bashExecution", "user", "assistant", "toolResult", "assistant"], "pi wrote the ! command");

    server = await startServer(bin, path.join(tmp.dir, "data-" + Date.now()));
    const said = execFileSync(bin, ["import", "-chat", "imported", "-url", server.url, file], { encoding: "utf8" });
    assert.match(said, /^imported 4 messages into imported as 4 entries \(\d+ lines skipped: /, said);
    assert.match(said, /\b1 message\/bashExecution\b/, said);
    if (modern) assert.match(said, /\b1 message\/system\b/, said);
    const r = await fetch(`${server.url}/v1/chats/imported/messages`);
    const { messages } = await r.json();
    assert.deepEqual(messages.map((m) => m.message.role), ["user", "assistant", "toolResult", "assistant"]);
  } finally {
    await server?.stop();
    work.remove();
  }
});
