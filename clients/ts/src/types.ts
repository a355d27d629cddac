// The API's types, taken from the OpenAPI document (src/openapi.ts is
// generated from shared/api/openapi.json by `npm run generate`, and a test
// fails when it is stale). Where the document leaves a shape open (an
// object of any fields), the type here names the fields the server sends,
// as the Go client does.

import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];

/** The JSON answer of an operation's status. */
export type Answer<Op extends keyof operations, Status extends number = 200> =
  operations[Op]["responses"] extends { [S in Status]: { content: { "application/json": infer T } } } ? T : never;

/** The JSON body of an operation's request. */
export type RequestBody<Op extends keyof operations> =
  operations[Op] extends { requestBody: { content: { "application/json": infer T } } } ? T : never;

/** A text block; a ref block is a text block whose whole text is "[image <16 hex digits>]". */
export type TextBlock = Schemas["TextBlock"] & { text: string; [key: string]: unknown };
/** An image block: base64 data and its type, and its stored name when it came from durachat. */
export type ImageBlock = Schemas["ImageBlock"] & { [key: string]: unknown };
export type ThinkingBlock = Schemas["ThinkingBlock"] & { [key: string]: unknown };
export type ToolCallBlock = Schemas["ToolCallBlock"] & { [key: string]: unknown };
/** A pi-ai content block; fields durachat does not use are kept. */
export type Block = TextBlock | ImageBlock | ThinkingBlock | ToolCallBlock;

/** A pi-ai message: role "user", "assistant" or "toolResult"; fields durachat does not use are kept. */
export type Message = Omit<Schemas["Message"], "content"> & {
  content: string | Block[];
  details?: unknown;
  provider?: string;
  model?: string;
  [key: string]: unknown;
};

/** A pi tool result: what a tool returns, what after-tool takes and gives back, what the memory tools answer. */
export type ToolResult = Omit<Schemas["ToolResult"], "content"> & {
  content: Block[];
  /** A host's own data about the result, passed through. */
  details?: unknown;
  [key: string]: unknown;
};

export type InlineImage = Required<Schemas["InlineImage"]>;

/** Names a tool call a result answers; nested marks a call another tool made (its result passes untouched). */
export type ToolCall = { id: string; name: string; nested?: boolean };
/** The host's bound on tool output; absent fields keep the defaults (51,200 bytes, 2,000 lines). */
export type Bounds = NonNullable<RequestBody<"afterTool">["bounds"]>;

export interface AfterToolInput {
  call: ToolCall;
  result: ToolResult;
  bounds?: Bounds;
}
export type AfterToolResult = Omit<Answer<"afterTool">, "result" | "stored" | "inline"> & {
  /** The tool result to keep, with refs in place of the stored images. */
  result: ToolResult;
  /** The names of the result's refs, in block order (those uploaded first included). */
  stored: string[];
  inline: InlineImage[];
};

export type OffloadInputResult = Omit<Answer<"offloadInput">, "message" | "stored" | "inline"> & {
  message: Message;
  stored: string[];
  inline: InlineImage[];
};

export type Format = RequestBody<"beforeRequest">["format"];
export type Mode = NonNullable<RequestBody<"beforeRequest">["mode"]>;
export type BeforeRequestInput<R = unknown> = Omit<RequestBody<"beforeRequest">, "request"> & { request: R };
export type Unrestored = NonNullable<Answer<"beforeRequest">["unrestored"]>[number];
export type BeforeRequestResult<R = unknown> = Omit<Answer<"beforeRequest">, "request"> & { request: R };

/** A pi-ai context, the request of the "pi" format. */
export interface PiContext {
  systemPrompt?: string;
  messages: Message[];
  tools?: ToolDef[];
  [key: string]: unknown;
}

export type UploadInput = RequestBody<"createUpload">;
export type UploadAnswer = Answer<"createUpload">;

export type View = Answer<"view">;
export type ToolDef = Omit<Answer<"tools">["tools"][number], "parameters"> & { parameters: Record<string, unknown> };
export type ZoomArgs = RequestBody<"zoom">;
export type DateArgs = RequestBody<"date">;
export type SearchArgs = RequestBody<"search">;
export type ForgetArgs = RequestBody<"forget">;
export type MemorySettings = Answer<"memorySettings">;
export type Tree = Answer<"tree">;

/** A chat's memory at a glance, as GET .../status answers it (the document leaves it open). */
export interface Status {
  entries: number;
  nodes: number;
  built: number;
  unbuilt: number;
  unbuiltLines: number;
  retrying: number;
  inFlight: number;
  stalled: boolean;
  lastError: string;
  lastErrorAt?: string;
  retries?: { node: string; failures: number; refusals: number; next: string; error: string }[];
  mechanical: { node: string; line: string }[] | null;
  mechanicalCount: number;
  modelCalls: number;
  verbatim: number;
  failedBuilds: number;
  view: ViewCounts;
  compactionView: ViewCounts;
  images: Record<string, unknown>;
  search: boolean;
  deleting?: { removed: number; images: number };
  [key: string]: unknown;
}
export interface ViewCounts {
  lines: number;
  bytes: number;
  batchOpen: boolean;
  merges: number;
}

export type ChatList = Answer<"listChats">;
export type ChatInfo = ChatList["chats"][number];
export type MessagePage = Omit<Answer<"readMessages">, "messages"> & { messages: StoredMessage[] };
/**
 * One logged message read back as the host logged it; seq is the id of its
 * first entry. An erased message keeps its seq and has no message: erased
 * says when it was erased.
 */
export type StoredMessage = { seq: number; message: Message; erased?: undefined } | { seq: number; erased: string; message?: undefined };
export type Deletion = Answer<"deleteChat", 200> & {
  /** Set when the server answered 202: the deletion goes on in the background; calling delete again resumes it. */
  accepted: boolean;
};
export type ImportResult = Answer<"importChat">;
/** What to erase: exactly one of seqs (messages' seqs as read back), match (a text, at least 4 characters) or images (names). */
export type EraseRequest = RequestBody<"eraseMessages">;
/** An erasure's receipt: the messages erased, the summary lines taken back and rebuilt, the images deleted and kept. */
export type Erasure = Answer<"getErasure">;
export type Retention = Answer<"getChatRetention">;
