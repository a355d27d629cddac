// durachat's MCP server driven by the official TypeScript SDK's clients
// over both transports: POST /v1/mcp on `durachat serve` and `durachat mcp`
// on stdio. The tools are listed, an image is logged and zoomed down to and
// its bytes compared, and a host without a token or with another tenant's
// is refused the chat's images. The v1 client opens a session (2025-11-25);
// the v2 client, pinned to 2026-07-28 or negotiating, sends each request
// alone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from "@modelcontextprotocol/client";
import { buildServer, png, startServer, tempDir } from "../../ts/test/server.mjs";

const token = "ts-mcp-token-0123456789";
const otherToken = "ts-mcp-other-0123456789";
let tmp, bin, server, url;

before(async () => {
  tmp = tempDir("durachat-mcp-");
  bin = buildServer(tmp.dir);
  server = await startServer(bin, path.join(tmp.dir, "data"), `${token}=ts,${otherToken}=other`);
  url = server.url;
});

after(async () => {
  await server?.stop();
  tmp?.remove();
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

const sha = (b64) => createHash("sha256").update(Buffer.from(b64, "base64")).digest("hex");

// zoomsToTheImage lists client's tools, logs a message with an image to
// chat, zooms from the view down to that message and checks the image
// content's bytes; it gives the image's stored name.
async function zoomsToTheImage(client, chat) {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ["date", "forget", "log", "search", "view", "zoom"]);
  const image = png(24, 16, (x, y) => [x * 10, y * 15, 200]);
  const logged = await call(client, "log", {
    chat,
    messages: [
      { role: "user", content: "Why does the login page fail?" },
      { role: "user", content: [{ type: "text", text: "The screenshot:" }, { type: "image", data: image, mimeType: "image/png" }] },
    ],
  });
  const id = JSON.parse(text(logged)).ids[1];
  let res = await call(client, "view", { chat });
  for (let depth = 0; depth < 64; depth++) {
    const block = [...text(res).matchAll(/^(\d+)\+(\d+)\|/gm)]
      .map((m) => [Number(m[1]), Number(m[2])])
      .find(([s, n]) => s <= id && id < s + n);
    assert.ok(block, `no line holds entry ${id}: ${text(res)}`);
    res = await call(client, "zoom", { chat, id: block[0], n: block[1] });
    if (block[1] === 1) break;
  }
  const img = res.content.find((c) => c.type === "image");
  assert.ok(img, `no image content: ${text(res)}`);
  assert.equal(img.mimeType, "image/png");
  assert.equal(sha(img.data), sha(image));
  const name = img._meta?.name;
  assert.match(name ?? "", /^[0-9a-f]{16}$/, "the image content names the stored image");
  return { name, image };
}

test("over HTTP a host zooms down to a logged image, receives its bytes and reads it as a resource", async () => {
  const client = await connect(token);
  try {
    const { name, image } = await zoomsToTheImage(client, "ts-demo");
    const read = await client.readResource({ uri: `durachat://chats/ts-demo/images/${name}` });
    assert.equal(read.contents.length, 1);
    assert.equal(sha(read.contents[0].blob), sha(image));
  } finally {
    await client.close();
  }
});

test("over HTTP a host with another tenant's token neither sees the chat nor reads its image", async () => {
  const owner = await connect(token);
  const other = await connect(otherToken);
  try {
    const { name } = await zoomsToTheImage(owner, "ts-tenants");
    await assert.rejects(other.readResource({ uri: `durachat://chats/ts-tenants/images/${name}` }), /not found/i);
    const view = await call(other, "view", { chat: "ts-tenants" });
    assert.doesNotMatch(text(view), /login page/, "the other tenant's view of the chat id is its own, empty chat");
  } finally {
    await owner.close();
    await other.close();
  }
});

test("the endpoint refuses a host without a token", async () => {
  await assert.rejects(connect(""));
});

test("on stdio `durachat mcp` serves its own embedded stores to a host", async () => {
  const data = tempDir("durachat-mcp-stdio-");
  const client = new Client({ name: "ts-test-host", version: "1.0.0" });
  try {
    await client.connect(
      new StdioClientTransport({
        command: bin,
        args: ["mcp"],
        env: { ...process.env, DURACHAT_DATA: path.join(data.dir, "data"), DURACHAT_LOG_LEVEL: "warn" },
        stderr: "inherit",
      }),
    );
    await zoomsToTheImage(client, "ts-stdio");
  } finally {
    await client.close();
    data.remove();
  }
});

// connectV2 connects the v2 client, negotiating as mode says ("auto", or
// { pin: version }).
async function connectV2(tok, mode) {
  const client = new ClientV2({ name: "ts-test-host-v2", version: "1.0.0" }, { versionNegotiation: { mode } });
  const transport = new StreamableHTTPClientTransportV2(new URL(url + "/v1/mcp"), {
    requestInit: { headers: tok ? { Authorization: `Bearer ${tok}` } : {} },
  });
  await client.connect(transport);
  return { client, transport };
}

for (const mode of [{ pin: "2026-07-28" }, "auto"]) {
  test(`over HTTP the v2 client (${JSON.stringify(mode)}) speaks 2026-07-28 with no session and zooms down to a logged image`, async () => {
    const { client, transport } = await connectV2(token, mode);
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
      assert.equal(client.getProtocolEra(), "modern");
      const chat = `ts-v2-${typeof mode === "string" ? mode : "pinned"}`;
      const { name, image } = await zoomsToTheImage(client, chat);
      const read = await client.readResource({ uri: `durachat://chats/${chat}/images/${name}` });
      assert.equal(sha(read.contents[0].blob), sha(image));
      assert.equal(read.cacheScope, "private", "a tenant's image is cached for it alone");
      assert.equal(transport.sessionId, undefined, "2026-07-28 has no session");
    } finally {
      await client.close();
    }
  });
}

test("over HTTP the v2 client pinned to 2026-07-28 is refused without a token", async () => {
  await assert.rejects(connectV2("", { pin: "2026-07-28" }));
});
