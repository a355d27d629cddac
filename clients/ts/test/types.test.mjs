// The client's types come from the OpenAPI document: src/openapi.ts is
// generated from shared/api/openapi.json (npm run generate), and this test
// fails when the committed file is not what the document generates now.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { tempDir } from "./server.mjs";

const pkg = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

test("src/openapi.ts is what the OpenAPI document generates", () => {
  const tmp = tempDir("durachat-openapi-");
  try {
    const out = path.join(tmp.dir, "openapi.ts");
    const cli = path.join(pkg, "node_modules/openapi-typescript/bin/cli.js");
    execFileSync(process.execPath, [cli, "../../shared/api/openapi.json", "-o", out], { cwd: pkg, stdio: "pipe" });
    const fresh = readFileSync(out, "utf8");
    const committed = readFileSync(path.join(pkg, "src/openapi.ts"), "utf8");
    assert.ok(fresh === committed, "src/openapi.ts is stale: run npm run generate in clients/ts and commit it");
  } finally {
    tmp.remove();
  }
});

test("an erased message read back type-checks as a StoredMessage, and a message needs one of message or erased", () => {
  const tmp = tempDir("durachat-types-");
  try {
    const file = path.join(tmp.dir, "check.ts");
    writeFileSync(
      file,
      `import type { StoredMessage } from ${JSON.stringify(path.join(pkg, "dist/types.js"))};\n` +
        `const erased: StoredMessage = { seq: 3, erased: "2026-12-07T10:00:00Z" };\n` +
        `const kept: StoredMessage = { seq: 4, message: { role: "user", content: "hi", timestamp: 1 } };\n` +
        `// @ts-expect-error: neither a message nor erased\n` +
        `const neither: StoredMessage = { seq: 5 };\n` +
        `export const all = [erased, kept, neither];\n`,
    );
    const tsc = path.join(pkg, "node_modules/typescript/bin/tsc");
    const args = [tsc, "--noEmit", "--strict", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--skipLibCheck", file];
    try {
      execFileSync(process.execPath, args, { cwd: pkg, stdio: "pipe" });
    } catch (err) {
      assert.fail(`tsc: ${err.stdout}${err.stderr}`);
    }
  } finally {
    tmp.remove();
  }
});
