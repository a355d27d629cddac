// Reads the files durachat imports (its exports, JSONL of {"seq",
// "message"}, and pi coding-agent session files, a tree since version 2)
// into the parts the import route takes: whole lines, each part under
// Lambda's 6 MB, and a line too large for one request cut into pieces.
// The same rules as the Go client's importfile package.

import { sha256, toBase64 } from "./images.js";

/** Bounds the body of one import request, under Lambda's 6 MB. */
export const importPart = 4 * 1024 * 1024;
/** How much of a line too large for one request one piece carries: 3 MiB, 4 MiB as base64. */
export const importPiece = 3 * 1024 * 1024;

/** One line to send: its text, and the file's line it comes from. */
interface Line {
  text: string;
  line: number;
  /** A message line, whose refs follow the images earlier parts renamed. */
  message: boolean;
}

/** One import request: its lines, and the file's line of each. */
export interface Part {
  lines: number[];
  /** The body, with the refs to each renamed image made refs to its new name. */
  render(renamed: Record<string, string>): Promise<string>;
}

/** The raw JSON text of each top-level member of an object, by key; undefined when text is not one object. */
export function members(text: string): Map<string, string> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const out = new Map<string, string>();
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\r\n".includes(text[i])) i++;
  };
  const str = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return text.slice(start, i);
  };
  const skip = () => {
    if (text[i] === '"') return void str();
    if (text[i] === "{" || text[i] === "[") {
      let depth = 0;
      do {
        if (text[i] === '"') {
          str();
          continue;
        }
        if (text[i] === "{" || text[i] === "[") depth++;
        else if (text[i] === "}" || text[i] === "]") depth--;
        i++;
      } while (depth > 0);
      return;
    }
    while (i < text.length && !",}] \t\r\n".includes(text[i])) i++;
  };
  ws();
  i++; // {
  for (;;) {
    ws();
    if (text[i] === "}") break;
    const key = JSON.parse(str()) as string;
    ws();
    i++; // :
    ws();
    const start = i;
    skip();
    out.set(key, text.slice(start, i));
    ws();
    if (text[i] === ",") i++;
  }
  return out;
}

interface Entry {
  n: number;
  type?: string;
  id?: string;
  parentId?: string | null;
  hasParent: boolean;
  seq: boolean;
  message?: string;
  image?: string;
  piece?: string;
  /** The role of its message, "" when it names none. */
  role: string;
  /** What tells other hosts' files apart (detect). */
  payload: boolean;
  topRole: boolean;
  uuid: boolean;
  sessionId: boolean;
  leafUuid: boolean;
}

/**
 * The roles of pi's session messages durachat does not log: pi 1.x's
 * system messages, and the coding agent's bash executions, custom
 * messages, branch and compaction summaries.
 */
const unloggedRole = new Set(["system", "bashExecution", "custom", "branchSummary", "compactionSummary"]);

// Lines of other hosts' session files (the Go client's importfile.detect):
// a Codex CLI rollout line is {"timestamp", "type", "payload"} with one of
// these types, or (older rollouts) a bare response item; a Claude Code
// session line carries "uuid" and "sessionId", or is a summary naming its
// "leafUuid", or a file-history snapshot.
const codexLine = new Set(["session_meta", "response_item", "event_msg", "turn_context", "compacted"]);
const codexItem = new Set(["function_call", "function_call_output", "local_shell_call", "reasoning", "custom_tool_call", "custom_tool_call_output", "web_search_call"]);
const piEntry = new Set(["session", "message", "thinking_level_change", "model_change", "usage", "compaction", "branch_summary", "custom", "custom_message", "context_edit", "label", "session_info"]);

/** The kind a skipped line is counted as: message/<role> for a message entry, else its type. */
function kind(e: Entry): string {
  if (e.type === "message" && e.message !== undefined) return `message/${e.role}`;
  return e.type ?? "untyped";
}

/** Refuses a file of another host's format, or one none of whose lines is an export's or a pi session's. */
function detect(entries: Entry[]): void {
  const refuse = (e: Entry, found: string) => {
    throw new Error(`line ${e.n}: the file is ${found}; durachat imports its own exports and pi session files`);
  };
  let known = false;
  for (const e of entries) {
    const t = e.type ?? "";
    if ((e.payload && codexLine.has(t)) || (t === "message" && e.message === undefined && e.topRole) || (codexItem.has(t) && e.message === undefined)) {
      refuse(e, `a Codex CLI rollout (a ${JSON.stringify(t)} line): not supported yet`);
    }
    if ((e.uuid && e.sessionId) || e.leafUuid || t === "file-history-snapshot") refuse(e, `a Claude Code session (a ${JSON.stringify(t)} line): not supported yet`);
    if (e.seq || (e.type === undefined && (e.image !== undefined || e.piece !== undefined)) || piEntry.has(t)) known = true;
  }
  if (known || entries.length === 0) return;
  const found = [...new Set(entries.map(kind))].slice(0, 3).map((k) => JSON.stringify(k));
  refuse(entries[0], `in no format durachat reads (lines of type ${found.join(", ")})`);
}

/**
 * The messages to log and the images an export carries, in order, and the
 * lines skipped, by kind (the Go client's importfile.Parse): an entry of
 * another branch is "off-branch", a message entry of a role durachat does
 * not log "message/<role>", any other its type. A file of another host's
 * format, or of none, is an error naming it and its line.
 */
export function parse(file: string): { lines: Line[]; skipped: number; skippedByKind: Record<string, number>; first: string } {
  const entries: Entry[] = [];
  let first: string | undefined;
  let tree = false;
  file.split("\n").forEach((raw, idx) => {
    const text = raw.trim();
    if (text === "") return;
    first ??= text;
    const m = members(text);
    if (!m) throw new Error(`line ${idx + 1} is not a JSON object`);
    const field = (k: string) => {
      const v = m.get(k);
      return v === undefined || v === "null" ? undefined : v;
    };
    const str = (k: string) => {
      const v = field(k);
      return v === undefined ? undefined : String(JSON.parse(v));
    };
    const type = str("type");
    const id = str("id");
    const parent = field("parentId");
    const message = field("message");
    const role = message === undefined ? undefined : members(message)?.get("role");
    const e: Entry = {
      n: idx + 1, type, id, parentId: parent === undefined ? undefined : String(JSON.parse(parent)),
      hasParent: parent !== undefined, seq: field("seq") !== undefined,
      message, image: field("image"), piece: field("piece"),
      role: role === undefined ? "" : String(JSON.parse(role)),
      payload: field("payload") !== undefined, topRole: field("role") !== undefined,
      uuid: field("uuid") !== undefined, sessionId: field("sessionId") !== undefined, leafUuid: field("leafUuid") !== undefined,
    };
    if (e.hasParent || (e.id && e.type !== "session")) tree = true;
    entries.push(e);
  });
  detect(entries);
  const keep = (e: Entry) => e.message !== undefined && (e.seq || (e.type === "message" && !unloggedRole.has(e.role)));
  const messageLine = (e: Entry): Line => ({ text: `{"type":"message","message":${e.message}}`, line: e.n, message: true });
  const skippedByKind: Record<string, number> = {};
  let skipped = 0;
  const skip = (k: string) => {
    skippedByKind[k] = (skippedByKind[k] ?? 0) + 1;
    skipped++;
  };
  const lines: Line[] = [];
  if (tree) {
    const byID = new Map<string, number>();
    entries.forEach((e, i) => e.id && byID.set(e.id, i));
    const path: Entry[] = [];
    for (let i = entries.length - 1; i >= 0; ) {
      const e = entries[i];
      path.push(e);
      if (!e.parentId) break;
      const p = byID.get(e.parentId);
      if (p === undefined || p >= i) throw new Error(`session entry ${JSON.stringify(e.id)} names a parent ${JSON.stringify(e.parentId)} that does not come before it`);
      i = p;
    }
    const on = new Set(path.map((e) => e.id));
    for (const e of entries) if (!on.has(e.id) && e.type !== "session") skip("off-branch");
    for (const e of path.reverse()) {
      if (keep(e)) lines.push(messageLine(e));
      else if (e.type !== "session") skip(kind(e));
    }
    return { lines, skipped, skippedByKind, first: first ?? "" };
  }
  for (const e of entries) {
    if (keep(e)) lines.push(messageLine(e));
    else if (e.type === "message" && e.message !== undefined) skip(kind(e));
    else if (e.image !== undefined && e.type === undefined && !e.seq) lines.push({ text: `{"image":${e.image}}`, line: e.n, message: false });
    else if (e.piece !== undefined && e.type === undefined && !e.seq) lines.push({ text: `{"piece":${e.piece}}`, line: e.n, message: false });
    else if (e.type !== "session") skip(kind(e));
  }
  return { lines, skipped, skippedByKind, first: first ?? "" };
}

/** Makes the refs in a message line to each renamed image refs to its new name (names are hex: a ref reads the same in JSON). */
export function renameRefs(text: string, renamed: Record<string, string>): string {
  for (const [from, to] of Object.entries(renamed)) text = text.split(`[image ${from}]`).join(`[image ${to}]`);
  return text;
}

const utf8 = new TextEncoder();

/** Cuts a line into the lines of its pieces, each carrying at most size bytes of it. */
export async function cut(line: string, size: number): Promise<string[]> {
  const data = utf8.encode(line);
  const sum = await sha256(data);
  const count = Math.ceil(data.length / size);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const piece = { line: sum, index: i, count, data: toBase64(data.subarray(i * size, Math.min(data.length, (i + 1) * size))) };
    out.push(JSON.stringify({ piece }));
  }
  return out;
}

/**
 * The import requests of a file, in order: whole lines, each part at most
 * importPart bytes, and a line larger than that in pieces, one a request.
 * Parse errors name the file's line.
 */
export function importParts(file: string): Part[] & { skipped: number; skippedByKind: Record<string, number> } {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(file);
  } catch (err) {
    throw new Error(`durachat: import: ${(err as Error).message}`);
  }
  // Each message line names its place in the file (the digest of the
  // file's first line, and its line), which its append's receipt names:
  // the server would take its line in the part for it.
  const named = sha256(utf8.encode(parsed.first)).then((h) => h.slice(0, 32));
  const text = async (l: Line, renamed: Record<string, string>) =>
    l.message ? `${renameRefs(l.text, renamed).slice(0, -1)},"at":{"file":"${await named}","line":${l.line}}}` : l.text;
  const parts: Part[] = [];
  let cur: Line[] = [];
  let size = 0;
  const flush = () => {
    if (cur.length === 0) return;
    const lines = cur;
    parts.push({
      lines: lines.map((l) => l.line),
      render: async (renamed) => (await Promise.all(lines.map((l) => text(l, renamed)))).map((t) => t + "\n").join(""),
    });
    cur = [];
    size = 0;
  };
  for (const l of parsed.lines) {
    const n = utf8.encode(l.text).length + 1;
    if (cur.length > 0 && size + n > importPart) flush();
    if (n > importPart) {
      // Too large for one request: its pieces go one a request, in order,
      // and the last imports the line.
      parts.push(...piecesOf(l, text));
      continue;
    }
    cur.push(l);
    size += n;
  }
  flush();
  return Object.assign(parts, { skipped: parsed.skipped, skippedByKind: parsed.skippedByKind });
}

/**
 * The pieces of a line too large for one request, a part each. A message
 * line's refs follow the renames of the parts before it, known only when
 * its first piece is sent, so the line is cut then, once.
 */
function piecesOf(l: Line, text: (l: Line, renamed: Record<string, string>) => Promise<string>): Part[] {
  const count = Math.ceil(utf8.encode(l.text).length / importPiece);
  let pieces: Promise<string[]> | undefined;
  return Array.from({ length: count }, (_, i) => ({
    lines: [l.line],
    render: async (renamed: Record<string, string>) => {
      pieces ??= text(l, renamed).then((t) => cut(t, importPiece));
      return (await pieces)[i] + "\n";
    },
  }));
}
