// The extension in a real pi session (the pinned SDK), with pi-ai's faux
// provider as the model and the real durachat server.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { fauxAssistantMessage, fauxModels, fauxText, fauxToolCall, modelAccess, modelRequest, piAgent } from "./pi.mjs";
import { buildServer, freePort, noisyPng, png, startServer, tempDir } from "./server.mjs";

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
async function openSession({ url, sessionManager, cwd, warnings, model = faux.getModel(), tool = screenshotTool(), env = {} }) {
  process.env.DURACHAT_URL = url;
  for (const name of ["DURACHAT_CHAT", "DURACHAT_TOKEN", "DURACHAT_BODY_LIMIT", "DURACHAT_DESCRIBE"]) delete process.env[name];
  Object.assign(process.env, env);
  const agentDir = path.join(cwd, ".agent");
  const settingsManager = SettingsManager.inMemory({ compaction: { enabled: false }, retry: { enabled: false } });
  const resourceLoader = new DefaultResourceLoader({
    cwd,
    agentDir,
    settingsManager,
    additionalExtensionPaths: [pkgDir],
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
    customTools: [tool],
  });
  assert.deepEqual(extensionsResult.errors, [], "the extension loads");
  await session.bindExtensions({
    onError: (e) => warnings?.push(`extension error: ${e.error ?? e.message ?? e}`),
  });
  return session;
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
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await fetch(`${url}/v1/chats/${chat}/status`, { headers });
    assert.equal(r.status, 200);
    const { entries } = await r.json();
    if (entries === n) return;
    assert.ok(entries < n, `${entries} entries logged, want ${n}`);
    assert.ok(Date.now() < deadline, `${entries} entries logged after 10 s, want ${n}`);
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
    session.dispose();

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
    session.dispose();
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
    session.dispose();
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
    session.dispose();
  } finally {
    globalThis.fetch = realFetch;
    caught.restore();
    await server.stop();
    work.remove();
  }
});

test("a model that takes no images gets refs, never image blocks; DURACHAT_DESCRIBE=1 does the same for any model", async () => {
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
      await run(session, "Take a screenshot of the login page.");
      const result = lastToolResult(context);
      // The offline compactor writes no descriptions: the ref stays bare.
      assert.deepEqual(result.content, [
        { type: "text", text: "Captured the login page." },
        { type: "text", text: `[image ${nameOf(shot)}]` },
      ], `${why}: the ref goes as text`);
      assert.deepEqual(images(context), [], `${why}: no image block in the model's request`);
      await logged(server.url, `pi-${session.sessionId}`, 4);
      session.dispose();
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
    const session = await openSession({ url: server.url, sessionManager: SessionManager.inMemory(work.dir), cwd: work.dir });
    const chat = `pi-${session.sessionId}`;
    // A PNG cut short: not an image, so the server refuses the user's
    // message that carries it, on every try.
    const broken = shot.slice(0, 64);
    faux.setResponses([fauxAssistantMessage(fauxText("That image is broken."))]);
    await run(session, "Here is a picture.", { images: [{ type: "image", data: broken, mimeType: "image/png" }] });
    faux.setResponses([fauxAssistantMessage(fauxText("Still here."))]);
    await run(session, "Are you there?");
    await logged(server.url, chat, 3); // both replies and the second prompt; not the refused prompt
    const r = await fetch(`${server.url}/v1/chats/${chat}/messages`);
    const log = JSON.stringify((await r.json()).messages.map((e) => e.message.content));
    assert.ok(!log.includes("Here is a picture."), `the refused message is not logged: ${log}`);
    for (const want of ["That image is broken.", "Are you there?", "Still here."]) {
      assert.ok(log.includes(want), `"${want}" is logged after the refused message: ${log}`);
    }
    const said = caught.warnings.filter((w) => w.includes("refused a message"));
    assert.equal(said.length, 1, `the refusal is said once: ${JSON.stringify(caught.warnings)}`);
    session.dispose();
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
    session.dispose();

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
    session.dispose();
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
    session.dispose();
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
    session.dispose();

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
    session.dispose();
  } finally {
    release();
    globalThis.fetch = realFetch;
    caught.restore();
    await server?.stop();
    work.remove();
  }
});
