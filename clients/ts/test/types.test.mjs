// The client's types come from the OpenAPI document: src/openapi.ts is
// generated from shared/api/openapi.json (npm run generate), and this test
// fails when the committed file is not what the document generates now.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
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
