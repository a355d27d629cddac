// The test servers' own start: a start is seen from the line that
// announces it, however much output follows in the same moment (the
// stack's ready line once slid out of the 64 KB tail the wait looked in,
// and the TS stack test waited its 10 minutes for a stack that was up).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { announced } from "./server.mjs";

const script = (s) => spawn(process.execPath, ["-e", s], { stdio: ["ignore", "pipe", "pipe"] });

test("the announcing line is found though 1 MB follows it in one write", async () => {
  const child = script(`process.stderr.write("stack: ready\\n  API        http://127.0.0.1:4321\\n" + "noise\\n".repeat(200000)); setTimeout(() => {}, 60000);`);
  try {
    assert.equal(await announced(child, /^\s*API\s+(http\S+)/, "the stack", true), "http://127.0.0.1:4321");
  } finally {
    child.kill();
  }
});

test("the announcing line is found when it comes split across writes", async () => {
  const child = script(`process.stdout.write("durachat serv"); setTimeout(() => process.stdout.write("ing on http://127.0.0.1:99\\nmore\\n"), 50); setTimeout(() => {}, 60000);`);
  try {
    assert.equal(await announced(child, /^durachat serving on (http\S+)$/, "durachat"), "http://127.0.0.1:99");
  } finally {
    child.kill();
  }
});

test("a server that exits before it announces is an error at once, not a wait", async () => {
  const child = script(`console.error("address in use"); process.exit(3);`);
  await assert.rejects(announced(child, /^never$/, "durachat", false, () => "address in use"), /exited with 3 before it started:\naddress in use/);
});
