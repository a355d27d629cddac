// Starts a local server speaking the SQS JSON protocol for durachat's tests.
// The port comes from the first argument or SQS_PORT (0 picks a free one);
// once it accepts connections it prints "sqs listening on port N". With
// SQS_EXIT_WITH_STDIN=1 it exits when its standard input closes, so a test
// process that started it takes it down when it ends, however it ends.
"use strict";

const { createSqsServer } = require("local-aws-sqs");

async function main() {
  const port = Number(process.argv[2] || process.env.SQS_PORT || 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`bad port ${JSON.stringify(process.argv[2] || process.env.SQS_PORT)}`);
  }
  const server = await createSqsServer({
    port,
    hostname: process.env.SQS_HOST || "127.0.0.1",
    // Tests create and drop many queues; AWS's 60 s wait before a name can be
    // reused would only slow them down.
    emulateQueueCreationLifecycle: false,
  });
  console.log(`sqs listening on port ${server.address().port}`);
  // Queues live in memory only: there is nothing to flush on the way out.
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  if (process.env.SQS_EXIT_WITH_STDIN === "1") {
    process.stdin.on("end", () => process.exit(0));
    process.stdin.on("error", () => process.exit(0));
    process.stdin.resume();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
