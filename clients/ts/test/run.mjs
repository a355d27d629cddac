// Runs the package's tests over one durachat server binary, at once: the
// client's under the Node that runs this script (the package supports Node
// 20.6 and later), and the AI SDK adapter's under Node 22 (the ai package
// needs Node 22; see server.mjs for which Node 22).

import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { node22, runSuites } from "./server.mjs";

const testDir = path.dirname(fileURLToPath(import.meta.url));
// The test files named, else every one of this directory.
const named = process.argv.slice(2);
const all = named.length ? named : readdirSync(testDir).filter((f) => f.endsWith(".test.mjs")).map((f) => path.join("test", f));
const ai = all.filter((f) => path.basename(f).startsWith("ai"));
const client = all.filter((f) => !ai.includes(f));

const suites = [];
if (client.length) suites.push({ name: "the client", node: process.execPath, files: client });
if (ai.length) suites.push({ name: "the AI SDK adapter", node: node22(), files: ai });
await runSuites(path.dirname(testDir), suites);
