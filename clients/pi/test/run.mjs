// Runs the extension's tests in real pi sessions on both pis it supports,
// at once: pi 1.x (@earendil-works) under Node 22, and 0.73.1
// (@mariozechner) under the Node that runs this script. The durachat server
// is built once for both.
//
// Node 22 is, in order: PI_NODE22, the pinned one of test/node22 (make
// tools installs it), or this Node when it is 22.19 or later.

import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { node22, runSuites } from "../../ts/test/server.mjs";

const testDir = path.dirname(fileURLToPath(import.meta.url));
// The test files named, else every one of this directory.
const named = process.argv.slice(2);
const files = named.length ? named : readdirSync(testDir).filter((f) => f.endsWith(".test.mjs")).map((f) => path.join("test", f));

await runSuites(path.dirname(testDir), [
  { name: "@earendil-works/pi-coding-agent 1.x", node: node22(), files, env: { PI_SCOPE: "@earendil-works" } },
  { name: "@mariozechner/pi-coding-agent 0.73.1", node: process.execPath, files, env: { PI_SCOPE: "@mariozechner" } },
]);
