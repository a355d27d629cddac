// The client against the deployed shape (cmd/stack: the four functions
// under the Lambda emulator behind the template's routes and bearer-token
// authorizer, over dynalite and the local S3 and SQS servers): the token,
// the hooks, an image past Lambda's 6 MB that goes by itself to S3, and the
// lifecycle. Like the Go stack tests, it skips when make tools has not
// installed the emulator and the Node servers, except in CI, where it fails.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, describeImage, fromBase64, refBlock, refName } from "../dist/index.js";
import { noisyPng, png, stackMissing, startStack, tempDir } from "./server.mjs";

const token = "ts-stack-token-0123456789";
const missing = stackMissing();
if (missing && process.env.CI) throw new Error(missing);

let stack;
let dir;
before(async () => {
  if (missing) return;
  dir = tempDir("durachat-ts-stack-");
  const started = Date.now();
  stack = await startStack(dir.dir, `${token}=tenant-ts`);
  console.log(`the stack started in ${((Date.now() - started) / 1000).toFixed(1)} s`);
});
after(async () => {
  await stack?.stop();
  dir?.remove();
});

test("on the deployed shape: token, hooks, an upload past 6 MB, the lifecycle", { skip: missing || false, timeout: 10 * 60_000 }, async () => {
  await assert.rejects(new Client(stack.url).chat("ts").view(), (e) => e.status === 401);
  const c = new Client(stack.url, { token });
  await c.health();
  const chat = c.chat("ts-stack");
  const small = png(2, 2, [1, 2, 3]);
  const ids = await chat.append("s1", [{ role: "user", content: [{ type: "text", text: "look" }, { type: "image", data: small, mimeType: "image/png" }], timestamp: 1767225600000 }]);
  assert.deepEqual(ids, [0]);
  const logged = (await chat.messages()).messages[0].message;
  const name = refName(logged.content[1]);
  assert.ok(name, "the log holds a ref");

  // 1300 x 1300 of noise: about 5 MB of PNG, 6.8 MB as base64, past
  // Lambda's 6 MB: the client sends it to S3 by itself.
  const shot = noisyPng(1300, 1300, 3);
  assert.ok(shot.length > 6 * 1024 * 1024);
  const a = await chat.afterTool({ call: { id: "t1", name: "screenshot" }, result: { content: [{ type: "image", data: shot, mimeType: "image/png" }] } });
  const shotName = (await describeImage(fromBase64(shot))).name;
  assert.deepEqual(a.result.content, [refBlock(shotName)]);
  assert.deepEqual(a.stored, [shotName]);
  const back = await chat.image(shotName);
  assert.ok(back.data.length > 0);

  const r = await chat.beforeRequest({ format: "pi", request: { messages: [{ role: "user", content: [refBlock(name)] }] } });
  assert.deepEqual(r.restored, [name]);
  assert.equal(r.request.messages[0].content[0].data, small);

  const view = await chat.view("turn");
  assert.match(view.view, /<chat>/);
  const zoom = await chat.zoom({ id: 0 });
  assert.ok(zoom.content.some((b) => b.type === "image" && b.data === small), "zoom returns the image");
  assert.ok((await c.chats()).chats.some((x) => x.chat === "ts-stack"));
  let d = await chat.delete();
  for (let i = 0; d.accepted && i < 20; i++) d = await chat.delete();
  assert.equal(d.deleted, true);
  assert.deepEqual((await chat.messages()).messages, []);
});
