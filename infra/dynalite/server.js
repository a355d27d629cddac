// Starts dynalite, a local server speaking the DynamoDB JSON protocol, in
// memory, for durachat's stack and adapter tests. The port comes from the
// first argument or DYNAMODB_PORT (0 picks a free one); once it accepts
// connections it prints "dynamodb listening on port N". With
// DYNAMODB_EXIT_WITH_STDIN=1 it exits when its standard input closes, so the
// process that started it takes it down when it ends, however it ends.
"use strict";

const dynalite = require("dynalite");

const port = Number(process.argv[2] || process.env.DYNAMODB_PORT || 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`bad port ${JSON.stringify(process.argv[2] || process.env.DYNAMODB_PORT)}`);
  process.exit(1);
}
// Tables are ACTIVE at once: the 500 ms of CREATING would only slow tests.
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.on("error", (err) => {
  console.error(err);
  process.exit(1);
});
// dynalite rethrows the error of a request whose client went away (a
// cancelled context closes the connection mid-request), which would take
// the whole server down; DynamoDB simply drops such a request. Anything
// else still ends the process.
process.on("uncaughtException", (err) => {
  if (err && (err.code === "ECONNRESET" || err.message === "aborted")) return;
  console.error(err);
  process.exit(1);
});
server.listen(port, process.env.DYNAMODB_HOST || "127.0.0.1", () => {
  console.log(`dynamodb listening on port ${server.address().port}`);
});
// Tables live in memory only: there is nothing to flush on the way out.
const stop = () => process.exit(0);
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
if (process.env.DYNAMODB_EXIT_WITH_STDIN === "1") {
  process.stdin.on("end", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
}
