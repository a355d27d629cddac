// Starts a local server speaking the SQS JSON protocol for durachat's tests.
// The port comes from the first argument or SQS_PORT (0 picks a free one);
// once it accepts connections it prints "sqs listening on port N". With
// SQS_EXIT_WITH_STDIN=1 it exits when its standard input closes, so a test
// process that started it takes it down when it ends, however it ends.
"use strict";

// Receives answer at once, as SQS's short polls do. local-aws-sqs 2.0.2
// makes every receive collect: it scans the queue every 10 ms (the first
// scan at 10 ms) until it holds MaxNumberOfMessages or 40 ms plus
// WaitTimeSeconds have passed, so a receive for a batch of 10 that finds
// fewer takes 40 ms; and a message sent, or made visible again, with no
// delay waits for a 0 ms timer. The Go side's LongPoll sends only short
// polls here, and its long polls wake on sends, so these timers were most
// of a message's way from a sender to a receiver. Those are the package's
// only 10 ms interval, 40 ms timeout and 0 ms timeouts (its other delays
// are whole seconds), so the shim below runs the first scan, and a 0 ms
// timer, as soon as the request that set them is handled, and ends a
// short poll right after its first scan. A timer cleared before then does
// not run.
const receiveScanMs = 10;
const shortPollMs = 40;
const cleared = new WeakSet();
const real = { setInterval, setTimeout, clearInterval, clearTimeout };
const soon = (timer, fn, args) => {
  let ran = false;
  setImmediate(() => {
    if (!ran && !cleared.has(timer)) {
      ran = true;
      fn(...args);
    }
  });
  return () => ran;
};
global.clearInterval = (t) => {
  if (t && typeof t === "object") cleared.add(t);
  real.clearInterval(t);
};
global.clearTimeout = (t) => {
  if (t && typeof t === "object") cleared.add(t);
  real.clearTimeout(t);
};
global.setInterval = (fn, ms, ...args) => {
  const timer = real.setInterval(fn, ms, ...args);
  if (ms === receiveScanMs) soon(timer, fn, args);
  return timer;
};
global.setTimeout = (fn, ms, ...args) => {
  if (ms === shortPollMs) return real.setTimeout(fn, 0, ...args); // after the first scan
  if (ms) return real.setTimeout(fn, ms, ...args);
  let ran = () => false;
  const timer = real.setTimeout(() => {
    if (!ran()) fn(...args);
  }, 0);
  ran = soon(timer, fn, args);
  return timer;
};

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
