// @durachat/client: a client of the durachat HTTP API (the image hooks,
// the transcript and the memory of a chat), for Node 20.6 or later, Deno,
// Bun and browsers: it needs fetch and Web Crypto, nothing else. The Vercel
// AI SDK adapter is the "@durachat/client/ai" export.

export {
  Chat,
  Client,
  DurachatError,
  codes,
  defaultAttempts,
  defaultBodyLimit,
  defaultMaxWaitMs,
  defaultTimeoutMs,
  isUnavailable,
  lambdaBodyLimit,
  localBodyLimit,
  retryAfterMs,
} from "./client.js";
export type { CallOptions, ClientOptions, ReadOptions, TreePage, Wait } from "./client.js";
export { describeImage, fromBase64, imageType, refBlock, refName, refs, toBase64 } from "./images.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
